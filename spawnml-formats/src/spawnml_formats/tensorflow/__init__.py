"""TensorFlow format loader: frozen ``GraphDef`` (``.pb``) files lowered to the IR."""
