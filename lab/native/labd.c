/* The lab's native FUSE daemon: libfuse 3's low-level API, the same service model as the Python
 * daemon (lunlat.lab.daemon), started and fed by it (lunlat/lab/daemon/native.py).
 *
 *     lunlat-labd --backing DIR --mount DIR [--max-inflight N] [--spin-us N] < settings
 *
 * A flat, fixed namespace: the regular files of DIR, read and written in place. Each read or write
 * of `<lun>.img` of a configured LUN waits for one of its array's slots (FIFO, no barging,
 * resizable while I/Os wait), then holds it for latency + bytes / bandwidth - overhead (never
 * below 0; overhead: the LUN's live figure for the op once its supervisor sent one, see `calib`), the real pread/pwrite done inside that time; latency is lognormal with the LUN's mean
 * and coefficient of variation (mu shifted by -sigma^2/2: the mean is kept). Other files pass
 * through. Creating, removing or renaming names is refused (EPERM); fsync and flush are no-ops.
 *
 * Settings arrive on stdin, already validated by Python (lunlat/lab/settings.py), one block per
 * version; each block is put in force by one pointer swap, so an I/O sees old or new, never a mix:
 *
 *     overhead READ_MS WRITE_MS READ_MS_PER_MIB WRITE_MS_PER_MIB
 *     sizes SMALL_MAX LARGE_MIN                  (bytes; required: the size classes below)
 *     array INDEX SLOTS BANDWIDTH_MIB_S          (INDEX: stable per array name, from 0)
 *     lun ARRAY_INDEX READ_MS WRITE_MS JITTER NAME   (NAME percent-encoded)
 *     end
 *
 * Each I/O has a size class by its bytes, as the exporter's biolatency source classes block requests
 * (`small` up to SMALL_MAX, `large` from LARGE_MIN, `middle` between; lunlat's ground.BIO_SIZES, sent
 * by the supervisor so that both sides class alike). Two more lines, outside or inside a block, for
 * the live calibration (lunlat/lab/daemon/calibration.py), each with 6 figures per LUN, by op (read,
 * then write) and within it by size class (small, middle, large):
 *
 *     calib MS x 6 NAME              the LUN's measured overhead per op and size class, in force at
 *                                    once (below 0: none, the settings' overhead applies again)
 *     stats                          the daemon writes `stat NAME (IOS NS) x 6` per LUN on stdout, then
 *                                    `end`: how many I/Os of the LUN it served per op and size class
 *                                    and their summed modelled service time, cumulative: from the
 *                                    callback receiving the I/O to its slot, plus the hold the model
 *                                    asked for (see serve())
 *
 * Replaced settings are kept, not freed (an I/O may still read them): a few hundred bytes per
 * change, and changes come from people and calibration. When stdin closes (its supervisor is
 * gone) the daemon keeps serving with the last settings until SIGTERM, so loop devices on it stay
 * usable and `lunlat-lab down` can detach them before it stops the daemon.
 *
 * Logs are logfmt lines on stderr, as the Python daemon's. */

#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARRAYS 4096
#define NAME_MAX_LEN 255
#define MIB 1048576.0
#define IMAGE_SUFFIX ".img"
#define DAEMON_NICE (-10)
/* <linux/fuse.h>: the open reply is sent by hand so it can carry FOPEN_PARALLEL_DIRECT_WRITES,
 * which libfuse 3.14 has no field for (without it the kernel serializes direct writes per file). */
#define FOPEN_DIRECT_IO_FLAG (1u << 0)
#define FOPEN_PARALLEL_DIRECT_WRITES_FLAG (1u << 6)

struct open_out {
	uint64_t fh;
	uint32_t open_flags;
	uint32_t padding;
};

/* --- logging ------------------------------------------------------------------------------ */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void logline(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logline(const char *level, const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "ts=%s.%03ldZ level=%s logger=lab.native ", stamp, ts.tv_nsec / 1000000, level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

/* --- clock and sleeping --------------------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until_ns(int64_t deadline)
{
	struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

/* Late wake-ups corrected on average, as lunlat/lab/daemon/sleeper.py: a running mean of how late
 * sleeps wake, and each sleep ends that much early. With a spin window, the sleep ends that much
 * earlier still and the thread spins to the deadline (off by default: measured on the lab's VM it
 * bought no accuracy, bench/lab_daemon.py). Shared by all threads, unlocked: a lost update among
 * racing threads costs nothing. */
#define MAX_LATENESS_NS 2000000
#define LATENESS_WEIGHT 0.02
#define NAP_NS 1000

static _Atomic int64_t lateness_ns;
static _Atomic int64_t observed;
static int64_t spin_ns;

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r) /* splitmix64 */
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(struct rng *r) /* (0, 1] */
{
	return ((double)(rng_next(r) >> 11) + 1.0) / 9007199254740992.0;
}

static double rng_normal(struct rng *r)
{
	return sqrt(-2.0 * log(rng_unit(r))) * cos(2.0 * M_PI * rng_unit(r));
}

static __thread struct rng thread_rng;
static __thread int thread_rng_ready;

static struct rng *my_rng(void)
{
	if (!thread_rng_ready) {
		thread_rng.s = (uint64_t)now_ns() ^ ((uint64_t)gettid() << 32) ^ (uint64_t)(uintptr_t)&thread_rng;
		thread_rng_ready = 1;
	}
	return &thread_rng;
}

static void observe(int64_t late)
{
	int64_t n = atomic_fetch_add_explicit(&observed, 1, memory_order_relaxed) + 1;
	double weight = 1.0 / (double)n;
	if (weight < LATENESS_WEIGHT)
		weight = LATENESS_WEIGHT;
	if (late < 0)
		late = 0;
	if (late > MAX_LATENESS_NS)
		late = MAX_LATENESS_NS;
	int64_t cur = atomic_load_explicit(&lateness_ns, memory_order_relaxed);
	atomic_store_explicit(&lateness_ns, cur + (int64_t)(weight * (double)(late - cur)), memory_order_relaxed);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#else
	__asm__ volatile("" ::: "memory");
#endif
}

static void until(int64_t deadline)
{
	int64_t now = now_ns();
	int64_t left = deadline - now;
	if (left <= 0)
		return;
	int64_t lateness = atomic_load_explicit(&lateness_ns, memory_order_relaxed);
	if (left > lateness + spin_ns) {
		int64_t wake = deadline - lateness - spin_ns;
		sleep_until_ns(wake);
		observe(now_ns() - wake);
	} else if (spin_ns == 0) {
		/* Less left than a wake-up is late: sleep briefly (waking about `lateness` later) with
		 * probability left / lateness, else not at all; the mean is what was left. */
		if (rng_unit(my_rng()) * (double)lateness < (double)left) {
			int64_t wake = now + NAP_NS;
			sleep_until_ns(wake);
			observe(now_ns() - wake);
		}
		return;
	}
	while (now_ns() < deadline)
		cpu_relax();
}

/* --- an array's slots: a FIFO counting semaphore, resizable while threads wait ----------------- */

struct waiter {
	pthread_cond_t cond;
	int granted;
	struct waiter *next;
};

struct slotq {
	pthread_mutex_t mu;
	int size, busy, ready;
	struct waiter *head, *tail;
};

static struct slotq queues[MAX_ARRAYS];

static void slot_acquire(struct slotq *q)
{
	pthread_mutex_lock(&q->mu);
	if (q->busy < q->size && q->head == NULL) {
		q->busy++;
		pthread_mutex_unlock(&q->mu);
		return;
	}
	struct waiter w = {.granted = 0, .next = NULL};
	pthread_cond_init(&w.cond, NULL);
	if (q->tail)
		q->tail->next = &w;
	else
		q->head = &w;
	q->tail = &w;
	while (!w.granted)
		pthread_cond_wait(&w.cond, &q->mu);
	pthread_mutex_unlock(&q->mu);
	pthread_cond_destroy(&w.cond);
}

static void grant_head(struct slotq *q) /* the slot changes hands; q->mu held */
{
	struct waiter *w = q->head;
	q->head = w->next;
	if (q->head == NULL)
		q->tail = NULL;
	w->granted = 1;
	pthread_cond_signal(&w->cond);
}

static void slot_release(struct slotq *q)
{
	pthread_mutex_lock(&q->mu);
	if (q->head && q->busy <= q->size)
		grant_head(q); /* busy stays the same */
	else
		q->busy--;
	pthread_mutex_unlock(&q->mu);
}

static void slot_resize(struct slotq *q, int size)
{
	pthread_mutex_lock(&q->mu);
	q->size = size;
	while (q->head && q->busy < q->size) {
		q->busy++;
		grant_head(q);
	}
	pthread_mutex_unlock(&q->mu);
}

/* --- settings ------------------------------------------------------------------------------- */

struct lun_setting {
	char name[NAME_MAX_LEN + 1];
	int array;
	double mean_ms[2], mu[2], sigma[2]; /* [0] read, [1] write */
};

struct settings {
	double overhead_ms[2], overhead_ms_per_mib[2];
	long long small_max, large_min; /* bytes: the size classes (the `sizes` line); 0 until given */
	double bandwidth[MAX_ARRAYS]; /* MiB/s by array index; 0 for an index not in this version */
	int nluns;
	struct lun_setting luns[];
};

static _Atomic(struct settings *) current;

static const struct lun_setting *find_lun(const struct settings *s, const char *name)
{
	for (int i = 0; i < s->nluns; i++)
		if (strcmp(s->luns[i].name, name) == 0)
			return &s->luns[i];
	return NULL;
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int percent_decode(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	for (; *in; in++) {
		int c = (unsigned char)*in;
		if (c == '%') {
			int hi = unhex(in[1]), lo = hi < 0 ? -1 : unhex(in[2]);
			if (lo < 0)
				return -1;
			c = hi * 16 + lo;
			in += 2;
		}
		if (n + 1 >= cap)
			return -1;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return 0;
}

static void lognormal(double mean, double cv, double *mu, double *sigma)
{
	double sigma2 = log1p(cv * cv);
	*mu = log(mean) - sigma2 / 2;
	*sigma = sqrt(sigma2);
}

/* --- live calibration: per-LUN service totals and measured overheads ------------------------ */

#define MAX_STATS 4096
#define NSIZES 3 /* size classes: 0 small, 1 middle, 2 large */

struct lunstat {
	char name[NAME_MAX_LEN + 1];
	/* [op][size]: op 0 read, 1 write. Cumulative. Per size class because what an I/O costs outside
	 * the daemon grows with its bytes: a snapshot copy's 1 MiB writes cost more than the 8K writes
	 * beside them, so one figure for both holds the 8K writes too short. */
	_Atomic int64_t count[2][NSIZES], elapsed_ns[2][NSIZES];
	_Atomic int64_t overhead_ns[2][NSIZES]; /* below 0: none measured, the settings' applies */
};

static struct lunstat lunstats[MAX_STATS];
static _Atomic int nlunstats;
static pthread_mutex_t lunstats_lock = PTHREAD_MUTEX_INITIALIZER;

/* The LUN's entry, created when `create` (NULL when the table is full): entries are only appended,
 * and each is complete before the count that publishes it, so lookups take no lock. */
static struct lunstat *lunstat_of(const char *name, int create)
{
	int n = atomic_load_explicit(&nlunstats, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(lunstats[i].name, name) == 0)
			return &lunstats[i];
	if (!create)
		return NULL;
	pthread_mutex_lock(&lunstats_lock);
	struct lunstat *found = NULL;
	n = atomic_load_explicit(&nlunstats, memory_order_relaxed);
	for (int i = 0; i < n && found == NULL; i++)
		if (strcmp(lunstats[i].name, name) == 0)
			found = &lunstats[i];
	if (found == NULL && n < MAX_STATS) {
		found = &lunstats[n];
		snprintf(found->name, sizeof found->name, "%s", name);
		for (int op = 0; op < 2; op++)
			for (int size = 0; size < NSIZES; size++)
				atomic_store(&found->overhead_ns[op][size], -1);
		atomic_store_explicit(&nlunstats, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&lunstats_lock);
	return found;
}

static void write_stats(FILE *out)
{
	int n = atomic_load_explicit(&nlunstats, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		struct lunstat *st = &lunstats[i];
		fputs("stat ", out);
		for (const char *c = st->name; *c; c++) /* percent-encoded, as names arrive */
			if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			    *c == '-' || *c == '_' || *c == '.' || *c == '~')
				fputc(*c, out);
			else
				fprintf(out, "%%%02X", (unsigned char)*c);
		for (int op = 0; op < 2; op++)
			for (int size = 0; size < NSIZES; size++)
				fprintf(out, " %lld %lld", (long long)atomic_load(&st->count[op][size]),
					(long long)atomic_load(&st->elapsed_ns[op][size]));
		fputc('\n', out);
	}
	fputs("end\n", out);
	fflush(out);
}

static int percent_decode(const char *in, char *out, size_t cap);

/* `calib` and `stats` lines: 1 when `line` was one (and done), 0 otherwise. */
static int control_line(char *line)
{
	char name[3 * NAME_MAX_LEN + 1], decoded[NAME_MAX_LEN + 1];
	double ms[2][NSIZES];
	int n = 0;
	if (strcmp(line, "stats\n") == 0 || strcmp(line, "stats") == 0) {
		write_stats(stdout);
		return 1;
	}
	if (strncmp(line, "calib ", 6) != 0)
		return 0;
	struct lunstat *st = NULL;
	if (sscanf(line, "calib %lf %lf %lf %lf %lf %lf %767s%n", &ms[0][0], &ms[0][1], &ms[0][2], &ms[1][0],
		   &ms[1][1], &ms[1][2], name, &n) == 7 &&
	    (line[n] == '\0' || line[n] == '\n') && percent_decode(name, decoded, sizeof decoded) == 0)
		st = lunstat_of(decoded, 1);
	if (st == NULL) {
		logline("warn", "msg=\"calibration line rejected\" line=\"%.80s\"", line);
		return 1;
	}
	for (int op = 0; op < 2; op++)
		for (int size = 0; size < NSIZES; size++)
			atomic_store(&st->overhead_ns[op][size], ms[op][size] < 0 ? -1 : (int64_t)(ms[op][size] * 1e6));
	return 1;
}

struct pending {
	struct settings *s;
	int cap;
	int slots[MAX_ARRAYS]; /* 0: array not in this version */
};

/* One line of a settings block; 1 at `end`, 0 for more, -1 for a bad line. */
static int parse_line(struct pending *p, char *line)
{
	char name[3 * NAME_MAX_LEN + 1];
	double a, b, c, d;
	int idx, slots, n = 0;
	line[strcspn(line, "\n")] = '\0';
	if (p->s == NULL) {
		p->cap = 16;
		p->s = calloc(1, sizeof *p->s + (size_t)p->cap * sizeof(struct lun_setting));
		memset(p->slots, 0, sizeof p->slots);
		if (p->s == NULL)
			return -1;
	}
	struct settings *s = p->s;
	if (strcmp(line, "end") == 0)
		return 1;
	long long small_max, large_min;
	if (sscanf(line, "sizes %lld %lld%n", &small_max, &large_min, &n) == 2 && line[n] == '\0') {
		if (small_max < 1 || large_min <= small_max)
			return -1;
		s->small_max = small_max, s->large_min = large_min;
		return 0;
	}
	if (sscanf(line, "overhead %lf %lf %lf %lf%n", &a, &b, &c, &d, &n) == 4 && line[n] == '\0') {
		s->overhead_ms[0] = a, s->overhead_ms[1] = b;
		s->overhead_ms_per_mib[0] = c, s->overhead_ms_per_mib[1] = d;
		return 0;
	}
	if (sscanf(line, "array %d %d %lf%n", &idx, &slots, &a, &n) == 3 && line[n] == '\0') {
		if (idx < 0 || idx >= MAX_ARRAYS || slots < 1 || !(a > 0))
			return -1;
		p->slots[idx] = slots;
		s->bandwidth[idx] = a;
		return 0;
	}
	if (sscanf(line, "lun %d %lf %lf %lf %767s%n", &idx, &a, &b, &c, name, &n) == 5 && line[n] == '\0') {
		if (idx < 0 || idx >= MAX_ARRAYS || p->slots[idx] == 0 || a < 0 || b < 0 || c < 0)
			return -1;
		if (s->nluns == p->cap) {
			p->cap *= 2;
			s = realloc(s, sizeof *s + (size_t)p->cap * sizeof(struct lun_setting));
			if (s == NULL)
				return -1;
			p->s = s;
		}
		struct lun_setting *l = &s->luns[s->nluns];
		memset(l, 0, sizeof *l);
		if (percent_decode(name, l->name, sizeof l->name) < 0)
			return -1;
		l->array = idx;
		l->mean_ms[0] = a, l->mean_ms[1] = b;
		for (int op = 0; op < 2; op++)
			if (l->mean_ms[op] > 0 && c > 0)
				lognormal(l->mean_ms[op], c, &l->mu[op], &l->sigma[op]);
		s->nluns++;
		return 0;
	}
	return -1;
}

/* Queues first (created or resized in place, their waiters stay), then the settings naming them. */
static void put_in_force(struct pending *p)
{
	for (int i = 0; i < MAX_ARRAYS; i++) {
		if (p->slots[i] == 0)
			continue;
		if (!queues[i].ready) {
			pthread_mutex_init(&queues[i].mu, NULL);
			queues[i].size = p->slots[i];
			queues[i].ready = 1;
		} else if (queues[i].size != p->slots[i]) {
			slot_resize(&queues[i], p->slots[i]);
		}
	}
	atomic_store_explicit(&current, p->s, memory_order_release);
	p->s = NULL;
}

static int count_arrays(const struct pending *p)
{
	int n = 0;
	for (int i = 0; i < MAX_ARRAYS; i++)
		n += p->slots[i] != 0;
	return n;
}

/* Reads blocks until one is complete: 1, or 0 at end of input, -1 on a bad block (skipped). */
static int read_block(FILE *in, struct pending *p)
{
	char *line = NULL;
	size_t cap = 0;
	int bad = 0, r = 0;
	while (getline(&line, &cap, in) >= 0) {
		if (control_line(line))
			continue;
		r = parse_line(p, line);
		if (r < 0 && !bad) {
			bad = 1;
			logline("warn", "msg=\"settings line rejected, keeping the previous settings\" line=\"%.80s\"", line);
		}
		if (r == 1)
			break;
	}
	free(line);
	if (r != 1) {
		free(p->s);
		p->s = NULL;
		return 0;
	}
	if (!bad && p->s->large_min == 0) { /* incomplete: every I/O's size class comes from it */
		bad = 1;
		logline("warn", "msg=\"settings block without its sizes line, keeping the previous settings\"");
	}
	if (bad) {
		free(p->s);
		p->s = NULL;
		return -1;
	}
	return 1;
}

static void *settings_reader(void *arg)
{
	(void)arg;
	struct pending *p = calloc(1, sizeof *p);
	for (;;) {
		int r = read_block(stdin, p);
		if (r == 0)
			break;
		if (r < 0)
			continue;
		int luns = p->s->nluns, arrays = count_arrays(p);
		put_in_force(p);
		logline("info", "msg=\"settings reloaded\" luns=%d arrays=%d", luns, arrays);
	}
	logline("warn", "msg=\"settings input closed; serving with the last settings until stopped\"");
	free(p);
	return NULL;
}

/* --- the service model of one I/O ----------------------------------------------------------- */

/* `overhead_ns`: the LUN's live measured overhead for this op and size class, below 0 when none; it
 * replaces both the settings' fixed and per-MiB overhead, as it was measured on I/Os of this LUN and
 * class. */
static int64_t service_ns(const struct settings *s, const struct lun_setting *l, int op, size_t nbytes,
			  int64_t overhead_ns)
{
	double mean = l->mean_ms[op], latency = 0;
	if (mean > 0)
		latency = l->sigma[op] > 0 ? exp(l->mu[op] + l->sigma[op] * rng_normal(my_rng())) : mean;
	double bandwidth = s->bandwidth[l->array];
	double mib = (double)nbytes / MIB;
	double transfer = bandwidth > 0 ? mib / bandwidth * 1000 : 0;
	double overhead = overhead_ns >= 0 ? (double)overhead_ns / 1e6
					   : s->overhead_ms[op] + s->overhead_ms_per_mib[op] * mib;
	double ms = latency + transfer - overhead;
	return ms > 0 ? (int64_t)(ms * 1e6) : 0;
}

/* The I/O's size class, as lunlat's biolatency source classes a block request of the same bytes. */
static int size_class(const struct settings *s, size_t nbytes)
{
	if ((long long)nbytes <= s->small_max)
		return 0;
	return (long long)nbytes < s->large_min ? 1 : 2;
}

struct handle {
	int fd;
	char lun[NAME_MAX_LEN + 1]; /* "" when the file is not <lun>.img */
	struct lunstat *stat;       /* the LUN's totals and live overhead; NULL when lun is "" */
};

/* Runs io(fd) inside the I/O's service time on its array; a file without settings gets none.
 * `received`: when the callback got the I/O, the start of what the daemon's totals count. */
static ssize_t serve(const struct handle *h, int op, size_t nbytes, ssize_t (*io)(void *), void *ctx,
		     int64_t received)
{
	struct settings *s = atomic_load_explicit(&current, memory_order_acquire);
	const struct lun_setting *l = h->lun[0] ? find_lun(s, h->lun) : NULL;
	if (l == NULL)
		return io(ctx);
	struct slotq *q = &queues[l->array];
	slot_acquire(q);
	int64_t start = now_ns();
	/* Sampled once the slot is held: a change made while the I/O queued applies to it. */
	s = atomic_load_explicit(&current, memory_order_acquire);
	l = find_lun(s, h->lun);
	int size = size_class(s, nbytes);
	int64_t over = h->stat ? atomic_load_explicit(&h->stat->overhead_ns[op][size], memory_order_relaxed) : -1;
	int64_t hold = l ? service_ns(s, l, op, nbytes, over) : 0;
	ssize_t result = io(ctx);
	if (hold > 0)
		until(start + hold);
	slot_release(q);
	if (h->stat) {
		/* The model's time, not the clock's: the wait for a slot plus the hold asked for. A late
		 * wake-up (2 busy cores: about 0.03 ms on average beside the DSS scans) or a pread/pwrite
		 * longer than its hold is not the array model's, so it belongs with the overhead the live
		 * calibration measures (kernel's mean - this) and removes. */
		int64_t modelled = hold > 0 ? start + hold - received : now_ns() - received;
		atomic_fetch_add_explicit(&h->stat->count[op][size], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&h->stat->elapsed_ns[op][size], modelled, memory_order_relaxed);
	}
	return result;
}

/* --- the filesystem ------------------------------------------------------------------------- */

static int backing_fd = -1;
static unsigned max_inflight = 128;
static const double TIMEOUT_S = 1.0;

/* Inode numbers: 1 is the root; a file gets one at its first lookup, by name, for the life of
 * the mount (the namespace is fixed, so the table only grows by the files there are). */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char **names;
static size_t nnames, names_cap;

static fuse_ino_t ino_of(const char *name)
{
	pthread_mutex_lock(&names_lock);
	for (size_t i = 0; i < nnames; i++) {
		if (strcmp(names[i], name) == 0) {
			pthread_mutex_unlock(&names_lock);
			return (fuse_ino_t)i + 2;
		}
	}
	if (nnames == names_cap) {
		names_cap = names_cap ? 2 * names_cap : 64;
		names = realloc(names, names_cap * sizeof *names);
	}
	names[nnames] = strdup(name);
	fuse_ino_t ino = (fuse_ino_t)nnames + 2;
	nnames++;
	pthread_mutex_unlock(&names_lock);
	return ino;
}

static const char *name_of(fuse_ino_t ino) /* NULL for the root or an unknown inode */
{
	const char *name = NULL;
	pthread_mutex_lock(&names_lock);
	if (ino >= 2 && ino - 2 < nnames)
		name = names[ino - 2];
	pthread_mutex_unlock(&names_lock);
	return name;
}

static int valid_name(const char *name)
{
	return name[0] && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* A regular file of the backing directory, or an errno. */
static int stat_file(const char *name, struct stat *st)
{
	if (!valid_name(name))
		return ENOENT;
	if (fstatat(backing_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	return S_ISREG(st->st_mode) ? 0 : ENOENT;
}

static void lab_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* The kernel sends loop's async direct I/O as background requests, 12 at most by default:
	 * raise that so the arrays' slots, not the FUSE connection, decide how many run at once. */
	conn->max_background = max_inflight;
	conn->congestion_threshold = max_inflight;
	logline("info", "msg=mounted max_inflight=%u engine=native", max_inflight);
}

static void lab_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	int err = stat_file(name, &e.attr);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	e.ino = ino_of(name);
	e.attr.st_ino = e.ino;
	e.attr_timeout = e.entry_timeout = TIMEOUT_S;
	fuse_reply_entry(req, &e);
}

static void lab_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err = 0;
	if (ino == FUSE_ROOT_ID) {
		err = fstat(backing_fd, &st) < 0 ? errno : 0;
	} else if (fi) {
		err = fstat(((struct handle *)(uintptr_t)fi->fh)->fd, &st) < 0 ? errno : 0;
	} else {
		const char *name = name_of(ino);
		err = name ? stat_file(name, &st) : ENOENT;
	}
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	st.st_ino = ino;
	fuse_reply_attr(req, &st, TIMEOUT_S);
}

static struct timespec pick_time(const struct timespec *given, int set, int now)
{
	struct timespec t = {.tv_sec = 0, .tv_nsec = UTIME_OMIT};
	if (now)
		t.tv_nsec = UTIME_NOW;
	else if (set)
		t = *given;
	return t;
}

static void lab_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	const char *name = name_of(ino);
	struct stat st;
	int err;
	if (name == NULL) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EPERM : ENOENT);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM); /* chmod, chown: as the Python daemon */
		return;
	}
	err = stat_file(name, &st);
	if (!err && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (fi) {
			err = ftruncate(((struct handle *)(uintptr_t)fi->fh)->fd, attr->st_size) < 0 ? errno : 0;
		} else {
			int fd = openat(backing_fd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
			err = fd < 0 ? errno : ftruncate(fd, attr->st_size) < 0 ? errno : 0;
			if (fd >= 0)
				close(fd);
		}
	}
	if (!err && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
			       FUSE_SET_ATTR_MTIME_NOW))) {
		struct timespec times[2] = {
			pick_time(&attr->st_atim, to_set & FUSE_SET_ATTR_ATIME, to_set & FUSE_SET_ATTR_ATIME_NOW),
			pick_time(&attr->st_mtim, to_set & FUSE_SET_ATTR_MTIME, to_set & FUSE_SET_ATTR_MTIME_NOW),
		};
		err = utimensat(backing_fd, name, times, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
	}
	if (!err)
		err = stat_file(name, &st);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	st.st_ino = ino;
	fuse_reply_attr(req, &st, TIMEOUT_S);
}

struct dirbuf {
	char *data;
	size_t size;
};

static void dir_add(fuse_req_t req, struct dirbuf *b, const char *name, fuse_ino_t ino)
{
	struct stat st = {.st_ino = ino};
	size_t len = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	b->data = realloc(b->data, b->size + len);
	st.st_mode = ino == FUSE_ROOT_ID ? S_IFDIR : S_IFREG;
	fuse_add_direntry(req, b->data + b->size, len, name, &st, (off_t)(b->size + len));
	b->size += len;
}

/* The listing is made at opendir and served from it: the regular files of the backing directory. */
static void lab_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	int fd = openat(backing_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (dir == NULL) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, err);
		return;
	}
	struct dirbuf *b = calloc(1, sizeof *b);
	dir_add(req, b, ".", FUSE_ROOT_ID);
	dir_add(req, b, "..", FUSE_ROOT_ID);
	struct dirent *d;
	while ((d = readdir(dir)) != NULL) {
		struct stat st;
		if (stat_file(d->d_name, &st) == 0)
			dir_add(req, b, d->d_name, ino_of(d->d_name));
	}
	closedir(dir);
	fi->fh = (uint64_t)(uintptr_t)b;
	fuse_reply_open(req, fi);
}

static void lab_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;
	if ((size_t)off >= b->size)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, b->data + off, b->size - (size_t)off < size ? b->size - (size_t)off : size);
}

static void lab_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;
	free(b->data);
	free(b);
	fuse_reply_err(req, 0);
}

static void lab_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	if (fstatvfs(backing_fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void lab_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const char *name = name_of(ino);
	struct stat st;
	int err = name ? stat_file(name, &st) : ENOENT;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	/* Only the access mode and O_TRUNC (libfuse asks the kernel for atomic O_TRUNC, so it comes
	 * here) are passed on: O_DIRECT from the loop driver is about the FUSE file (direct_io already
	 * sends every I/O here); on the backing file it would demand aligned buffers and be refused by
	 * some filesystems (tmpfs), and the backing is only storage. */
	int fd = openat(backing_fd, name, (fi->flags & (O_ACCMODE | O_TRUNC)) | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	struct handle *h = calloc(1, sizeof *h);
	h->fd = fd;
	size_t len = strlen(name), suffix = strlen(IMAGE_SUFFIX);
	if (len > suffix && strcmp(name + len - suffix, IMAGE_SUFFIX) == 0 && len - suffix <= NAME_MAX_LEN)
		memcpy(h->lun, name, len - suffix);
	h->stat = h->lun[0] ? lunstat_of(h->lun, 1) : NULL;
	struct open_out out = {
		.fh = (uint64_t)(uintptr_t)h,
		.open_flags = FOPEN_DIRECT_IO_FLAG | FOPEN_PARALLEL_DIRECT_WRITES_FLAG,
	};
	struct iovec iov = {.iov_base = &out, .iov_len = sizeof out};
	if (fuse_reply_iov(req, &iov, 1) != 0) { /* the request was interrupted: nobody holds h */
		close(fd);
		free(h);
	}
}

struct rw {
	int fd;
	void *buf;
	size_t size;
	off_t off;
};

static ssize_t do_pread(void *ctx)
{
	struct rw *rw = ctx;
	ssize_t n = pread(rw->fd, rw->buf, rw->size, rw->off);
	return n < 0 ? -errno : n;
}

static ssize_t do_pwrite(void *ctx)
{
	struct rw *rw = ctx;
	size_t done = 0;
	while (done < rw->size) {
		ssize_t n = pwrite(rw->fd, (char *)rw->buf + done, rw->size - done, rw->off + (off_t)done);
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static __thread char *read_buf;
static __thread size_t read_cap;

static void lab_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	int64_t received = now_ns();
	const struct handle *h = (const struct handle *)(uintptr_t)fi->fh;
	if (size > read_cap) {
		free(read_buf);
		read_buf = malloc(size);
		read_cap = read_buf ? size : 0;
		if (read_buf == NULL) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	struct rw rw = {.fd = h->fd, .buf = read_buf, .size = size, .off = off};
	ssize_t n = serve(h, 0, size, do_pread, &rw, received);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, read_buf, (size_t)n);
}

static void lab_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)ino;
	int64_t received = now_ns();
	const struct handle *h = (const struct handle *)(uintptr_t)fi->fh;
	struct rw rw = {.fd = h->fd, .buf = (void *)buf, .size = size, .off = off};
	ssize_t n = serve(h, 1, size, do_pwrite, &rw, received);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void lab_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0); /* nothing is buffered here: writes went to the backing file already */
}

static void lab_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino, (void)datasync, (void)fi;
	/* Deliberately not passed on: the images are scratch space removed at `lab down`, and a real
	 * fsync would add the host disk's latency to the loop device's flushes, which the lab controls. */
	fuse_reply_err(req, 0);
}

static void lab_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	close(h->fd);
	free(h);
	fuse_reply_err(req, 0);
}

/* The namespace is fixed: the caller creates the images in the backing directory beforehand. */
static void lab_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t d)
{
	(void)p, (void)n, (void)m, (void)d;
	fuse_reply_err(req, EPERM);
}

static void lab_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *fi)
{
	(void)p, (void)n, (void)m, (void)fi;
	fuse_reply_err(req, EPERM);
}

static void lab_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
	(void)p, (void)n, (void)m;
	fuse_reply_err(req, EPERM);
}

static void lab_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
	(void)p, (void)n;
	fuse_reply_err(req, EPERM);
}

static void lab_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned f)
{
	(void)p, (void)n, (void)np, (void)nn, (void)f;
	fuse_reply_err(req, EPERM);
}

static void lab_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
	(void)l, (void)p, (void)n;
	fuse_reply_err(req, EPERM);
}

static void lab_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t p, const char *n)
{
	(void)i, (void)p, (void)n;
	fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops ops = {
	.init = lab_init,
	.lookup = lab_lookup,
	.getattr = lab_getattr,
	.setattr = lab_setattr,
	.opendir = lab_opendir,
	.readdir = lab_readdir,
	.releasedir = lab_releasedir,
	.statfs = lab_statfs,
	.open = lab_open,
	.read = lab_read,
	.write = lab_write,
	.flush = lab_flush,
	.fsync = lab_fsync,
	.release = lab_release,
	.mknod = lab_mknod,
	.create = lab_create,
	.mkdir = lab_mkdir,
	.unlink = lab_unlink,
	.rmdir = lab_unlink,
	.rename = lab_rename,
	.symlink = lab_symlink,
	.link = lab_link,
};

/* --- main ----------------------------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr, "usage: lunlat-labd --backing DIR --mount DIR [--max-inflight N] [--spin-us N] < settings\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *backing = NULL, *mountpoint = NULL;
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--backing") == 0)
			backing = argv[++i];
		else if (strcmp(argv[i], "--mount") == 0)
			mountpoint = argv[++i];
		else if (strcmp(argv[i], "--max-inflight") == 0)
			max_inflight = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--spin-us") == 0)
			spin_ns = (int64_t)(atof(argv[++i]) * 1000);
		else
			return usage();
	}
	if (backing == NULL || mountpoint == NULL || max_inflight < 1 || spin_ns < 0)
		return usage();
	backing_fd = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (backing_fd < 0) {
		logline("error", "msg=\"cannot start\" err=\"--backing %s: %s\"", backing, strerror(errno));
		return 2;
	}
	/* Before libfuse starts its workers, so they inherit them: the default 50 us timer slack would
	 * add to every injected latency (0 means "default", hence 1 ns), and the daemon must not wait
	 * for a core behind the host's other load (not allowed unless root: then it just runs). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	setpriority(PRIO_PROCESS, 0, DAEMON_NICE);

	struct pending *first = calloc(1, sizeof *first);
	if (read_block(stdin, first) != 1) {
		logline("error", "msg=\"cannot start\" err=\"no valid settings on stdin\"");
		return 2;
	}
	put_in_force(first);
	free(first);

	/* The settings reader and libfuse's workers block the stop signals: they go to this thread,
	 * whose handler (libfuse's) ends the loop. */
	sigset_t stop, old;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	pthread_t reader;
	pthread_create(&reader, NULL, settings_reader, NULL);
	pthread_detach(reader);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	char *fuse_argv[] = {argv[0], "-o", "fsname=lunlat-lab", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
	if (se == NULL)
		return 1;
	if (fuse_set_signal_handlers(se) != 0)
		return 1;
	if (fuse_session_mount(se, mountpoint) != 0) {
		logline("error", "msg=\"cannot mount\" mount=%s", mountpoint);
		return 1;
	}
	/* Every I/O waits in its own worker; idle workers are kept, as creating one is paid on the
	 * I/O path. */
	struct fuse_loop_config *config = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(config, max_inflight);
	fuse_loop_cfg_set_idle_threads(config, max_inflight);
	fuse_loop_cfg_set_clone_fd(config, 0);
	int rc = fuse_session_loop_mt(se, config);
	fuse_loop_cfg_destroy(config);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	if (rc == SIGTERM || rc == SIGINT || rc == SIGHUP || rc == 0) {
		logline("info", "msg=stopped reason=%s", rc ? "signal" : "unmounted");
		return 0;
	}
	logline("error", "msg=\"fuse loop failed\" status=%d", rc);
	return 1;
}
