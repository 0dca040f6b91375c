/* Classify an image with a model the host preloaded, through wasi-nn's load_by_name.
 * usage: classify_named NAME INPUT.f32 N C H W */
#include "classify.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s NAME INPUT.f32 N C H W\n", argv[0]);
        return 1;
    }
    graph model;
    check(wasi_nn_load_by_name(argv[1], (uint32_t)strlen(argv[1]), &model), "load_by_name");
    classify(model, argv[2], argv + 3);
    return 0;
}
