"""luminal's benchmark suite: named configurations run over every engine on the machine
(ours on CPU/CUDA, PyTorch eager and torch.compile, llama.cpp), each in its own process,
measured the same way, stored in SQLite and drawn as an offline HTML report."""
