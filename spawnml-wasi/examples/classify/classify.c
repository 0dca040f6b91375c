/* Classify an image with a model file through wasi-nn.
 * usage: classify MODEL INPUT.f32 N C H W [gpu]
 * MODEL is any file SpawnML loads (the encoding is detected); INPUT.f32 holds the NCHW float32
 * tensor; the top five classes are printed as "rank class score". */
#include "classify.h"

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: %s MODEL INPUT.f32 N C H W [gpu]\n", argv[0]);
        return 1;
    }
    uint32_t size;
    uint8_t *bytes = read_file(argv[1], &size);
    graph_builder builder = {bytes, size};
    int32_t target = argc == 8 && strcmp(argv[7], "gpu") == 0 ? TARGET_GPU : TARGET_CPU;
    graph model;
    check(wasi_nn_load(&builder, 1, ENCODING_AUTODETECT, target, &model), "load");
    free(bytes);
    classify(model, argv[2], argv + 3);
    return 0;
}
