// SPDX-License-Identifier: GPL-2.0
/*
 * lunlat's per-I/O latency histograms of the published LUNs (docs/metrics.md, "Per-I/O latency
 * histograms"). Compiled by clang (>= 15, for bpf_core_type_matches) against a vmlinux.h that
 * bpftool dumps from the build host's BTF, loaded by libbpf, which relocates every struct access
 * and kernel difference below to the running kernel's BTF (CO-RE). Nothing here depends on the
 * kernel's version number: distributions backport (Debian took 5.11's block_rq_issue change into
 * 5.10.137), so each difference is decided from the kernel's own types.
 *
 * The programs are BTF-enabled raw tracepoints (tp_btf, kernel 5.5+): they read the request's
 * members directly, with no bpf_probe_read_kernel call per member. Per I/O, nothing crosses into
 * user space and no per-I/O event is made:
 *   block_rq_issue      the request's bytes and start into `sizes` (keyed by the request; an entry
 *                       left there by an earlier request is a completion never seen), and the
 *                       time since its start (queue time) into its counters;
 *   block_io_done       (kernel 6.5+, where blk_account_io_done counts diskstats) or, on kernels
 *   or block_rq_complete  without it, block_rq_complete's part that ends the request: the latency
 *                       into a log2 bucket and the sum, per (device, op, size class).
 * lunlat reads the per-CPU counters at scrape time (sources/biolatency.py).
 *
 * Kernel facts relied on (include/trace/events/block.h, block/blk-mq.c, include/linux/blk-mq.h):
 * - Timing is the kernel's own: diskstats adds `now - rq->start_time_ns` (blk_account_io_done);
 *   start_time_ns is 0 where I/O statistics are off for the queue (then diskstats counts nothing
 *   either): such completions are counted as untimed.
 * - What diskstats counts, on block_io_done: requests whose rq_flags have RQF_IO_STAT and not
 *   RQF_FLUSH_SEQ (blk_account_io_done's test; the bits are enum rqf_flags, relocated from BTF).
 *   On block_rq_complete (args: rq, error, nr_bytes; blk_update_request traces it before it
 *   consumes nr_bytes): a request completed in parts fires it once per part, so the part that ends
 *   it counts, nr_bytes >= rq->__data_len; a part of 0 bytes (a flush sequence ending a write
 *   already completed) is not an I/O.
 * - block_io_done fires after blk_update_request has consumed the request's bytes
 *   (rq->__data_len is 0 there), which is why the size is taken at issue.
 * - The op is cmd_flags & REQ_OP_MASK, the low 8 bits (include/linux/blk_types.h: REQ_OP_BITS 8,
 *   REQ_OP_READ 0, REQ_OP_WRITE 1); other ops (flush, discard) are not counted.
 * - The device is the request's whole disk: rq->q->disk, or rq->rq_disk on kernels before
 *   commit f3fa33acca9f ("block: remove the ->rq_disk field in struct request", v5.17), whose
 *   request_queue had no disk before commit d152c682f03c ("block: add an explicit ->disk
 *   backpointer to the request_queue"); as major << 20 | first_minor (include/linux/kdev_t.h
 *   MINORBITS). Both commits are the ones libbpf-tools' core_fixes.bpf.h names for the same test.
 * - block_rq_issue's prototype: (struct request_queue *q, struct request *rq) before commit
 *   a54895fa ("block: remove the request_queue to argument request based tracepoints", v5.11-rc1,
 *   as libbpf-tools' biolatency.bpf.c cites it; Debian's changelog has 5.10 take it at 5.10.137,
 *   in 5.10.140-1), (struct request *rq) since. libbpf-tools decides it from BTF too
 *   (biolatency.c, has_block_rq_issue_single_arg).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "histogram.h"

#define MINORBITS 20	/* include/linux/kdev_t.h */
#define REQ_OP_MASK 0xff /* include/linux/blk_types.h: (1 << REQ_OP_BITS) - 1 */

char LICENSE[] SEC("license") = "GPL";

/* Problems counted apart (the `problems` map's index), published as source error reasons. */
#define PROBLEM_UNSIZED 0	     /* a completion whose size was not seen at issue: classed by 0 bytes */
#define PROBLEM_ISSUE_PROTOTYPE 1    /* block_rq_issue has a prototype this program does not know */
#define PROBLEM_UNSEEN 2	     /* a request issued in sight whose completion no program saw */
#define PROBLEMS 3

struct counters {
	__u64 buckets[BUCKETS];
	__u64 ns;	/* summed latency */
	__u64 queue_ns; /* summed queue time (start to issue) */
	__u64 untimed;	/* completions without a start time */
};

/* A published device: its slot, and since when it is published, on bpf_ktime_get_ns()'s clock
 * ("See: clock_gettime(CLOCK_MONOTONIC)", include/uapi/linux/bpf.h), the clock rq->start_time_ns is
 * compared with below: a request that started before it was issued out of the programs' sight (the
 * device not yet published, or the programs not yet attached), so its size is unknown, and expected
 * to be. The loader writes both (biolatency.py, DEVICE_VALUE). */
struct published {
	__u32 slot;
	__u32 pad;
	__u64 since_ns;
};

/* Published devices: kernel dev_t -> its slot. Only these are counted: the filter runs here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* set by the loader: max_devices */
	__type(key, __u32);
	__type(value, struct published);
} devices SEC(".maps");

/* Per CPU, per (slot, op, size class): element ((slot * OPS) + op) * SIZE_CLASSES + class. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* set by the loader: max_devices * OPS * SIZE_CLASSES */
	__type(key, __u32);
	__type(value, struct counters);
} io SEC(".maps");

/* What `sizes` keeps of an issued request until its completion deletes it. The request's start
 * tells the same request issued again (requeued: blk_mq_requeue_request leaves start_time_ns, set
 * once per request) from a new one in the same struct request, which is a tag's: the tag goes back
 * only when the request before is freed after its completion (block/blk-mq.c,
 * __blk_mq_end_request -> blk_mq_free_request -> __blk_mq_free_request -> blk_mq_put_tag). An entry
 * still there for another start is a completion the programs never saw (PROBLEM_UNSEEN). */
struct issued {
	__u64 start_ns;
	__u32 bytes;
	__u32 pad;
};

/* Each issued request of a published device, until it completes. LRU (kernel 4.10+): an entry
 * whose completion was never counted (its device unpublished meanwhile, or gone) is dropped when
 * room is needed rather than filling the map for good (its cost beside a plain hash's:
 * docs/benchmarks.md, "The biolatency source"). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, __u64);
	__type(value, struct issued);
} sizes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROBLEMS);
	__type(key, __u32);
	__type(value, __u64);
} problems SEC(".maps");

/* Flavours (libbpf ignores the ___suffix when matching names) for fields and types that moved. */
struct request___with_rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

typedef void (*btf_trace_block_rq_issue___rq)(void *, struct request *);
typedef void (*btf_trace_block_rq_issue___q_rq)(void *, struct request_queue *, struct request *);

static __always_inline void count_problem(__u32 problem)
{
	__u64 *n = bpf_map_lookup_elem(&problems, &problem);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline struct gendisk *disk_of(struct request *rq)
{
	struct request___with_rq_disk *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return old->rq_disk;
	return rq->q->disk;
}

/* The request's device slot, or NULL when its device is not published (or it has no disk). */
static __always_inline struct published *device_of(struct request *rq)
{
	struct gendisk *disk = disk_of(rq);
	__u32 dev;

	if (!disk)
		return NULL;
	dev = (__u32)disk->major << MINORBITS | (__u32)disk->first_minor;
	return bpf_map_lookup_elem(&devices, &dev);
}

/* 0 read, 1 write, -1 anything else. */
static __always_inline int op_of(struct request *rq)
{
	__u32 op = rq->cmd_flags & REQ_OP_MASK;

	return op <= 1 ? (int)op : -1;
}

static __always_inline struct counters *counters_of(__u32 slot, int op, __u32 class)
{
	__u32 index = ((slot * OPS) + (__u32)op) * SIZE_CLASSES + class;

	return bpf_map_lookup_elem(&io, &index);
}

/* A completed request of a published device: its latency into the counters of its size class. */
static __always_inline void count_completion(struct request *rq, __u32 bytes_left)
{
	__u64 key = (__u64)rq, start, now;
	struct issued *issued;
	__u32 bytes, b;
	struct published *device;
	struct counters *c;
	int op;

	op = op_of(rq);
	if (op < 0)
		return;
	device = device_of(rq);
	if (!device)
		return;
	now = bpf_ktime_get_ns();
	start = rq->start_time_ns;
	issued = bpf_map_lookup_elem(&sizes, &key);
	if (issued) {
		bytes = issued->bytes;
		bpf_map_delete_elem(&sizes, &key);
	} else {
		/* Issued before its device was published (or the programs attached), or `sizes` was full:
		 * what is left of it. Only a request started since the device is published was surely
		 * issued in sight: its missing size is a problem. (No start: untimed, counted as such.) */
		bytes = bytes_left;
		if (!bytes && start && start >= device->since_ns)
			count_problem(PROBLEM_UNSIZED);
	}
	c = counters_of(device->slot, op, size_class(bytes));
	if (!c)
		return;
	if (!start || start > now) {
		__sync_fetch_and_add(&c->untimed, 1);
		return;
	}
	b = bucket_of(now - start);
	if (b < BUCKETS)
		__sync_fetch_and_add(&c->buckets[b], 1);
	__sync_fetch_and_add(&c->ns, now - start);
}

SEC("tp_btf/block_io_done")
int lunlat_io_done(__u64 *ctx)
{
	struct request *rq = (void *)ctx[0];
	__u32 flags = rq->rq_flags;
	__u32 io_stat = 1U << bpf_core_enum_value(enum rqf_flags, __RQF_IO_STAT);
	__u32 flush_seq = 1U << bpf_core_enum_value(enum rqf_flags, __RQF_FLUSH_SEQ);

	if (flags & flush_seq)
		return 0; /* a step of a flush sequence: the request ends again, restored, at its last */
	if (!(flags & io_stat)) {
		__u64 key = (__u64)rq;

		/* Not accounted in diskstats either; ended all the same, so its entry goes. */
		bpf_map_delete_elem(&sizes, &key);
		return 0;
	}
	count_completion(rq, 0);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int lunlat_rq_complete(__u64 *ctx)
{
	struct request *rq = (void *)ctx[0];
	__u32 nr_bytes = (__u32)ctx[2];
	__u32 left;

	if (!nr_bytes)
		return 0;
	left = rq->__data_len;
	if (nr_bytes < left)
		return 0; /* a part that does not end the request */
	count_completion(rq, left);
	return 0;
}

/* An issued request of a published device: its bytes kept until it completes, its queue time. */
static __always_inline int count_issue(struct request *rq)
{
	struct issued entry = {}, *earlier;
	struct published *device;
	struct counters *c;
	__u64 key, start, now;
	int op;

	op = op_of(rq);
	if (op < 0)
		return 0;
	device = device_of(rq);
	if (!device)
		return 0;
	key = (__u64)rq;
	start = rq->start_time_ns;
	/* The same struct request still kept for another request that started while its device was
	 * published: that request ended (its tag is reused) and the completion program never ran for it,
	 * though the kernel counted no recursion miss (docs/metrics.md, "What the kernel does not show
	 * it"). Without a start the two cannot be told apart: such requests are untimed anyway. */
	earlier = bpf_map_lookup_elem(&sizes, &key);
	if (earlier && start && earlier->start_ns != start && earlier->start_ns >= device->since_ns)
		count_problem(PROBLEM_UNSEEN);
	entry.start_ns = start;
	entry.bytes = rq->__data_len;
	bpf_map_update_elem(&sizes, &key, &entry, BPF_ANY);
	c = counters_of(device->slot, op, size_class(entry.bytes));
	if (!c)
		return 0;
	now = bpf_ktime_get_ns();
	if (start && start <= now)
		__sync_fetch_and_add(&c->queue_ns, now - start);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int lunlat_rq_issue(__u64 *ctx)
{
	/* Each argument is read by its own load at a constant offset: the verifier refuses a load through
	 * a context pointer moved by a computed offset ("dereference of modified ctx ptr"), which is what
	 * clang makes of one load whose index depends on the branch. The empty asm keeps the two loads
	 * apart (tests/integration/test_biolatency_prototypes.py loads the second one). */
	if (bpf_core_type_matches(btf_trace_block_rq_issue___rq))
		return count_issue((void *)ctx[0]);
	if (bpf_core_type_matches(btf_trace_block_rq_issue___q_rq)) {
		asm volatile("" ::: "memory");
		return count_issue((void *)ctx[1]);
	}
	count_problem(PROBLEM_ISSUE_PROTOTYPE);
	return 0;
}
