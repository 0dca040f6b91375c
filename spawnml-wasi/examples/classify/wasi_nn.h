/* The wasi-nn preview-1 calls (module "wasi_ephemeral_nn"), lowered as Wasmtime's witx lowers
 * them: lists are (pointer, length) pairs, records pass by pointer, every call returns an
 * nn_errno and writes its result through the last pointer. */
#ifndef WASI_NN_H
#define WASI_NN_H

#include <stdint.h>

typedef uint16_t nn_errno;
enum { NN_SUCCESS = 0, NN_INVALID_ARGUMENT, NN_INVALID_ENCODING, NN_MISSING_MEMORY, NN_BUSY,
       NN_RUNTIME_ERROR, NN_UNSUPPORTED_OPERATION, NN_TOO_LARGE, NN_NOT_FOUND };

typedef uint8_t tensor_type;
enum { TENSOR_F16 = 0, TENSOR_F32, TENSOR_F64, TENSOR_U8, TENSOR_I32, TENSOR_I64 };

typedef uint8_t graph_encoding;
enum { ENCODING_OPENVINO = 0, ENCODING_ONNX, ENCODING_TENSORFLOW, ENCODING_PYTORCH,
       ENCODING_TENSORFLOWLITE, ENCODING_AUTODETECT };

typedef uint8_t execution_target;
enum { TARGET_CPU = 0, TARGET_GPU, TARGET_TPU };

typedef uint32_t graph;
typedef uint32_t graph_execution_context;

typedef struct { const uint8_t *data; uint32_t size; } graph_builder;

typedef struct {
    struct { const uint32_t *data; uint32_t size; } dimensions;
    tensor_type type;
    struct { const uint8_t *data; uint32_t size; } data;
} tensor;

#define WASI_NN_IMPORT(name) __attribute__((import_module("wasi_ephemeral_nn"), import_name(name)))

WASI_NN_IMPORT("load")
int32_t wasi_nn_load(const graph_builder *builders, uint32_t count, int32_t encoding,
                     int32_t target, graph *result);
WASI_NN_IMPORT("load_by_name")
int32_t wasi_nn_load_by_name(const char *name, uint32_t length, graph *result);
WASI_NN_IMPORT("init_execution_context")
int32_t wasi_nn_init_execution_context(graph g, graph_execution_context *result);
WASI_NN_IMPORT("set_input")
int32_t wasi_nn_set_input(graph_execution_context context, uint32_t index, const tensor *input);
WASI_NN_IMPORT("compute")
int32_t wasi_nn_compute(graph_execution_context context);
WASI_NN_IMPORT("get_output")
int32_t wasi_nn_get_output(graph_execution_context context, uint32_t index, uint8_t *buffer,
                           uint32_t capacity, uint32_t *written);

#endif
