/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The histogram's arithmetic, apart from the programs (biolatency.bpf.c) so that it can also be
 * compiled for the host and checked against lunlat's contract (tests/unit/test_bpf_histogram.py):
 * the layout lunlat reads, the size classes and the bucket of a latency. The includer provides
 * __u32, __u64 and __always_inline.
 */
#ifndef LUNLAT_HISTOGRAM_H
#define LUNLAT_HISTOGRAM_H

/* The layout lunlat reads (contract.py: BIO_BUCKETS, BIO_OPS, BIO_SIZES, BIO_SMALL_MAX, BIO_LARGE_MIN). */
#define BUCKETS 18		/* 17 bounds, 1 ms x 2^k for k in -7..9, and +Inf */
#define OPS 2			/* read, write */
#define SIZE_CLASSES 3		/* small, middle, large */
#define SMALL_MAX 16384		/* bytes: a small I/O is at most this (contract.BIO_SMALL_MAX) */
#define LARGE_MIN 131072	/* bytes: a large I/O is at least this (contract.BIO_LARGE_MIN) */
/* Latency units: ms/1024, so that every bound is a power of two (2^(k+10) for 1 ms x 2^k) and the
 * bucket is a base-2 logarithm. The lowest bound, 1 ms / 128, is 8 units = 2^3. */
#define LOWEST_BOUND_LOG2 3

static __always_inline __u32 size_class(__u32 bytes)
{
	if (bytes <= SMALL_MAX)
		return 0;
	return bytes < LARGE_MIN ? 1 : 2;
}

/* floor(log2(v)) for v > 0, in 5 steps (no loop for the verifier to walk). */
static __always_inline __u32 log2_u32(__u32 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/* Bucket i holds latencies below bound i and at or above bound i - 1; the last, everything at or
 * above the top bound (so `le` is exclusive: exactly 1,000,000 ns counts above 1 ms). */
static __always_inline __u32 bucket_of(__u64 ns)
{
	__u64 units = ns * 1024 / 1000000;
	__u32 b;

	if (units < (1ULL << LOWEST_BOUND_LOG2))
		return 0;
	if (units >= (1ULL << (LOWEST_BOUND_LOG2 + BUCKETS - 2)))
		return BUCKETS - 1;
	b = log2_u32((__u32)units) - LOWEST_BOUND_LOG2 + 1;
	return b < BUCKETS ? b : BUCKETS - 1;
}

#endif
