"""fixedcode-study: does a decoder-only LM need a trainable input embedding table?"""

__version__ = "0.1.0"
