"""neardup with other libraries: :mod:`neardup.integrations.datasets` (Hugging Face datasets).

Each integration imports its library only when imported itself, so a missing one is an error of
that module alone, naming the extra to install.
"""
