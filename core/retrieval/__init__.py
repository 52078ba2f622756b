"""First-stage retrievers (BM25, dense, tree, fusion, Milvus), their encoders, indexes and trainers."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "base", "bert", "bm25", "dense", "densetrans", "dual_encoder", "encoding", "fixed_run", "fusion",
    "indexing", "milvus", "milvus_client", "milvus_collections", "milvus_plan", "milvus_server", "minilm_encoder",
    "ranx_fusion", "sdml", "sdml_measure", "st_biencoder", "tree", "tree_search", "vector_shards", "wordmean"
]
