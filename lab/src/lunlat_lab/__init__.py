"""The lab: latency-controlled loop LUNs on a FUSE filesystem, fio workloads, the reference scenario."""
