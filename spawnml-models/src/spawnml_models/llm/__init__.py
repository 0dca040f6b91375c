"""Text generation from llama-family GGUF models: graph, tokenizer, chat template, sampler, pipeline."""

from .chat import ChatTemplate
from .config import LlamaConfig
from .graph import build_llama_graph
from .pipeline import GenerationStats, TextGenerationPipeline
from .sampling import Sampler
from .tokenizer import GGUFTokenizer, tokenizer_from_gguf

__all__ = [
    "ChatTemplate",
    "GGUFTokenizer",
    "GenerationStats",
    "LlamaConfig",
    "Sampler",
    "TextGenerationPipeline",
    "build_llama_graph",
    "tokenizer_from_gguf",
]
