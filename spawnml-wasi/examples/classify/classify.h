/* What both example guests share: read a float32 image tensor, run it, print the top five. */
#ifndef CLASSIFY_H
#define CLASSIFY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasi_nn.h"

#define MAX_CLASSES 65536

/* Exit with a message naming the call when a wasi-nn call fails. */
static void check(int32_t errno_value, const char *call) {
    if (errno_value != NN_SUCCESS) {
        fprintf(stderr, "wasi-nn %s failed: error %d\n", call, (int)errno_value);
        exit(2);
    }
}

/* The whole file at `path`, its size in *size. */
static uint8_t *read_file(const char *path, uint32_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *data = malloc(length > 0 ? (size_t)length : 1);
    if (!data || fread(data, 1, (size_t)length, file) != (size_t)length) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(file);
    *size = (uint32_t)length;
    return data;
}

/* Run `model` on the NCHW float32 tensor in `input_path` and print "rank class score" lines. */
static void classify(graph model, const char *input_path, char **dims_text) {
    uint32_t dims[4], size;
    for (int i = 0; i < 4; i++) dims[i] = (uint32_t)strtoul(dims_text[i], NULL, 10);
    uint8_t *pixels = read_file(input_path, &size);
    tensor input = {{dims, 4}, TENSOR_F32, {pixels, size}};
    graph_execution_context context;
    check(wasi_nn_init_execution_context(model, &context), "init_execution_context");
    check(wasi_nn_set_input(context, 0, &input), "set_input");
    check(wasi_nn_compute(context), "compute");
    static float scores[MAX_CLASSES];
    uint32_t written;
    check(wasi_nn_get_output(context, 0, (uint8_t *)scores, sizeof scores, &written), "get_output");
    uint32_t classes = written / sizeof(float);
    static int taken[MAX_CLASSES];
    for (int rank = 1; rank <= 5 && rank <= (int)classes; rank++) {
        uint32_t best = 0;
        while (taken[best]) best++;
        for (uint32_t c = best + 1; c < classes; c++)
            if (!taken[c] && scores[c] > scores[best]) best = c;
        taken[best] = 1;
        printf("%d %u %.6f\n", rank, best, scores[best]);
    }
    free(pixels);
}

#endif
