"""A minimal eBPF loader for the biolatency source: the kernel's BTF read for struct offsets, the
bpf(2) system call, and two hand-assembled programs (docs/metrics.md, "Per-I/O latency histograms", says why
hand-written: no compiler, kernel headers or bpftrace needed on the host, and per I/O only the work
the histogram needs)."""
