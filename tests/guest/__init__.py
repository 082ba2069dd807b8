"""Other Linux kernels under qemu: Debian's kernels booted with the host's root file system shared read-only
(guest.py), for tests that must run on the kernels database hosts run."""
