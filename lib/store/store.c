/* SPDX-License-Identifier: Apache-2.0 */
#include "store.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pprof/pprof.h"

#define MAX_FRAMES 512
#define NVALS 4
#define KERNEL_MAPPING (-2)
#define KIND_FREE 0xff /* st_stack.kind of a free slot */
#define GC_INTERVAL_NS 1000000000ull
#define LIVE_MIN_CAP 1024u /* live heap table slots at first (it doubles at half full) */
#define RENDER_WAIT_NS 2000000000ull

struct st_mapping {
	uint64_t start, limit, offset;
	uint32_t prot, dev_major, dev_minor;
	uint64_t inode;
	char *file;
	char build_id[2 * PP_BUILD_ID_MAX + 1];
	uint8_t bid[PP_BUILD_ID_MAX];
	size_t bid_len;
	bool kernel;
	uint32_t obj; /* object index + 1 (holds a reference), 0 = none */
};

struct st_thread {
	pid_t tid;
	char name[16];
};

struct st_bid {
	bool tried;
	bool stat_ok; /* dev..mtime are the file's (else the maps line's dev+inode) */
	size_t len;
	uint8_t id[PP_BUILD_ID_MAX];
	uint64_t dev, ino, size, mtime_ns;
};

/*
 * A file mapped by one or more processes: its build id, else its
 * dev+inode+size+mtime. Locations in it are keyed by (object, file offset),
 * so every process mapping it shares them and their names. Held by the
 * maps entries, interned mappings and locations that use it.
 */
struct st_obj {
	uint32_t refs; /* 0 = free slot */
	uint64_t hash;
	struct st_bid key;
};

struct st_proc {
	pid_t pid;
	uint64_t start_time;
	char comm[16];
	char container_id[65], container[64]; /* "" = unknown */
	char *exe;
	char *cmdline;
	size_t cmdline_len;
	int group;
	bool used; /* slot holds a process (alive or exited, not yet released) */
	bool alive;
	bool release; /* marked by gc() */
	uint64_t exit_ns; /* monotonic time it was seen gone */
	uint64_t exit_seq; /* snapshots with seq < exit_seq were taken before the exit */
	struct pp_maps maps;
	struct st_bid *bids; /* parallel to maps.v */
	uint32_t *objs; /* parallel to maps.v: object index + 1 (a reference), 0 none */
	int32_t *mix; /* parallel to maps.v: interned mapping index, -1 not yet */
	uint64_t maps_read_ns; /* last refresh on a miss (rate limit) */
	struct st_mapping *mappings; /* interned for profiles */
	size_t n_mappings, cap_mappings;
	int exe_mapping; /* index in mappings or -1 */
	struct st_thread *threads;
	size_t n_threads, cap_threads;
	/* Distinct thread names: stacks are keyed by name, not tid, so a
	 * thread-per-request server does not multiply its stacks. */
	char (*names)[16];
	size_t n_names, cap_names;
};

struct st_frame {
	char *function, *system_name, *file;
	uint32_t line, start_line;
};

struct st_loc {
	/*
	 * The process that symbolizes it (the first to use it; another live
	 * one takes over when it exits; NO_PROC once none is needed).
	 * proc, mapping and addr are that process's.
	 */
	uint32_t proc;
	int32_t mapping; /* index into proc->mappings, -1 none, KERNEL_MAPPING */
	uint64_t addr; /* adjusted: exact for the leaf, ret-1 for callers */
	/* Key: (kid, pc, flags). LOC_OBJ: kid = object index, pc = the file
	 * offset of the pc as given; LOC_KERNEL: kid = NO_PROC, the pc; else
	 * (anonymous, JIT, unknown memory) kid = the process, the pc. */
	uint32_t kid;
	uint64_t pc;
	uint8_t flags; /* key: LOC_LEAF | LOC_KERNEL | LOC_OBJ; LOC_FREE = free slot */
	uint64_t off; /* LOC_OBJ: file offset of addr */
	uint32_t obj; /* LOC_OBJ: object index + 1 (a reference) */
	uint64_t refs; /* stack frames using it (up to max_stacks * 512) */
	bool pending; /* queued for the symbolization worker */
	uint64_t serial; /* unique per slot use: write-backs check it */
	struct st_frame *frames;
	uint32_t n_frames;
	bool has_function, has_file, has_line, has_inline;
};

struct st_stack {
	uint8_t kind; /* KIND_FREE: free slot */
	uint64_t id; /* stable: never reused, keys snapshot values */
	uint32_t proc;
	pid_t tid;
	uint64_t size;
	uint32_t n;
	uint32_t *locs;
	int64_t v[NVALS];
	uint64_t mgen; /* st->gen when v last changed (snapshot overlays) */
	uint64_t hash;
};

struct st_live {
	uint32_t proc1; /* proc index + 1; 0 = empty slot */
	uint32_t stack;
	uint64_t addr, size;
};

/* Open-addressing table of indices (+1), keyed by a stored hash. */
struct idx_table {
	uint32_t *slots;
	size_t cap; /* power of two */
};

struct pp_store {
	pthread_mutex_t lock;
	struct pp_store_opts opts;
	struct pp_symbolizer *sym;

	struct st_proc *procs;
	size_t n_procs, cap_procs; /* slots ever used (some may be free) */
	size_t procs_held; /* used slots */

	struct st_loc *locs;
	size_t n_locs, cap_locs;
	struct idx_table loc_idx;
	uint32_t *free_locs; /* released slots, reused first */
	size_t n_free_locs, cap_free_locs;

	struct st_stack *stacks;
	size_t n_stacks, cap_stacks;
	struct idx_table stack_idx;
	uint32_t *free_stacks;
	size_t n_free_stacks, cap_free_stacks;
	uint64_t next_stack_id;

	/* Open snapshots (a delta base or a window start), newest first;
	 * shared by the windows of a kind that begin within SNAP_SHARE_NS. */
	struct pp_store_snapshot *snaps;
	uint64_t snap_seq;
	uint64_t snap_bytes; /* held by open snapshots' values */
	uint64_t gen; /* bumped at each change of a stack's values (stack_touch) */
	uint64_t last_gc_ns;
	size_t n_exited; /* held, not alive */

	/* Symbolization worker: locations queued by loc_prepare. */
	const struct pp_store_sym_ops *ops;
	void *ops_ctx;
	pthread_t worker;
	bool worker_started, worker_stop;
	pthread_cond_t work_cond, done_cond; /* CLOCK_MONOTONIC */
	uint32_t *pending;
	size_t n_pending, cap_pending;
	uint64_t loc_serial;
	uint64_t enq_count, done_count;

	unsigned renders; /* views out: gc() frees nothing meanwhile */
	bool is_view; /* a render's frozen copy: values already relative to its base */

	struct st_live *live; /* grows by doubling at half full, up to live_max_cap */
	size_t live_cap, live_max_cap, n_live;

	struct st_obj *objs;
	size_t n_objs, cap_objs, objs_held;
	struct idx_table obj_idx;
	_Atomic uint64_t file_opens; /* files opened for build ids (bids_read) */

	struct pp_store_stats stats;
};

struct snap_val {
	uint64_t id;
	int64_t v[NVALS];
};

struct pp_store_snapshot {
	struct pp_store *st;
	struct pp_store_snapshot *prev, *next;
	unsigned refs; /* its window and the overlays on it; under the store lock */
	/* NULL: v holds every stack of kind. Else v holds the stacks changed
	 * since parent was taken (st->gen > parent->gen), the rest are parent's. */
	struct pp_store_snapshot *parent;
	uint64_t gen; /* st->gen when taken */
	size_t bytes; /* counted in st->snap_bytes */
	uint64_t seq;
	enum pp_profile_kind kind;
	uint64_t time_ns;
	size_t n;
	struct snap_val *v; /* stacks of kind, sorted by id */
};

/* ---- small helpers ---- */

/* x's values changed: snapshots taken before now hold other values for it. Lock held. */
static inline void stack_touch(struct pp_store *st, struct st_stack *x)
{
	x->mgen = ++st->gen;
}

static uint8_t stack_kind_for(enum pp_profile_kind k);
static void *worker_main(void *arg);

static int sym_resolve(void *ctx, pid_t pid, const struct pp_map *m, const uint8_t *build_id,
		       size_t build_id_len, uint64_t addr, struct pp_sym_result *ret)
{
	return pp_symbolizer__resolve(ctx, pid, m, build_id, build_id_len, addr, ret);
}

static int sym_resolve_kernel(void *ctx, uint64_t addr, struct pp_sym_result *ret)
{
	return pp_symbolizer__resolve_kernel(ctx, addr, ret);
}

static int sym_resolve_jit(void *ctx, pid_t pid, uint64_t addr, struct pp_sym_result *ret)
{
	return pp_symbolizer__resolve_jit(ctx, pid, addr, ret);
}

static const struct pp_store_sym_ops symbolizer_ops = {
	.resolve = sym_resolve,
	.resolve_kernel = sym_resolve_kernel,
	.resolve_jit = sym_resolve_jit,
};

/* pp_grow with the new elements zeroed. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t old = *cap;

	if (need <= old)
		return 0;
	if (pp_grow(arr, cap, need, elem, 16) < 0)
		return -ENOMEM;
	memset((char *)*arr + old * elem, 0, (*cap - old) * elem);
	return 0;
}

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int idx_init(struct idx_table *t, size_t cap)
{
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->cap = cap;
	return 0;
}

/* ---- processes ---- */

static struct st_proc *proc_find(struct pp_store *st, pid_t pid, uint32_t *ret_idx)
{
	/* Newest first: a reused pid refers to the live process. */
	for (size_t i = st->n_procs; i-- > 0;) {
		if (st->procs[i].pid == pid && st->procs[i].alive) {
			if (ret_idx)
				*ret_idx = (uint32_t)i;
			return &st->procs[i];
		}
	}
	return NULL;
}

/* ---- objects ---- */

#define NO_PROC UINT32_MAX

static uint64_t obj_hash(const struct st_bid *k)
{
	if (k->len)
		return pp_hash_bytes(k->id, k->len, 13);
	uint64_t v[4] = { k->dev, k->ino, k->size, k->mtime_ns };
	return pp_hash_bytes(v, sizeof(v), 17);
}

static bool obj_key_eq(const struct st_bid *a, const struct st_bid *b)
{
	if (a->len || b->len)
		return a->len == b->len && !memcmp(a->id, b->id, a->len);
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns;
}

/* The identity of m's file: its build id, else what bids_read saw of the
 * file (dev, inode, size, mtime), else the maps line's dev+inode. */
static void obj_key(const struct pp_map *m, const struct st_bid *b, struct st_bid *k)
{
	memset(k, 0, sizeof(*k));
	if (b && (b->len || b->stat_ok)) {
		*k = *b; /* compared by build id when there is one */
	} else {
		k->dev = ((uint64_t)m->dev_major << 32) | m->dev_minor;
		k->ino = m->inode;
	}
}

static void idx_rebuild_objs(struct pp_store *st)
{
	struct idx_table *t = &st->obj_idx;
	memset(t->slots, 0, t->cap * sizeof(*t->slots));
	for (size_t i = 0; i < st->n_objs; i++) {
		if (!st->objs[i].refs)
			continue;
		size_t s = st->objs[i].hash & (t->cap - 1);
		while (t->slots[s])
			s = (s + 1) & (t->cap - 1);
		t->slots[s] = (uint32_t)i + 1;
	}
}

static int idx_grow(struct pp_store *st, struct idx_table *t, size_t n,
		    void (*rebuild)(struct pp_store *st));

/* A reference to the object of key k (created if new): index + 1, 0 on
 * ENOMEM. Lock held. */
static uint32_t obj_get(struct pp_store *st, const struct st_bid *k)
{
	uint64_t h = obj_hash(k);
	size_t s = h & (st->obj_idx.cap - 1);
	while (st->obj_idx.slots[s]) {
		struct st_obj *o = &st->objs[st->obj_idx.slots[s] - 1];
		if (o->hash == h && obj_key_eq(&o->key, k)) {
			o->refs++;
			return st->obj_idx.slots[s];
		}
		s = (s + 1) & (st->obj_idx.cap - 1);
	}
	size_t i;
	for (i = 0; i < st->n_objs; i++)
		if (!st->objs[i].refs)
			break;
	if (i == st->n_objs) {
		if (st->n_objs >= UINT32_MAX - 1 ||
		    idx_grow(st, &st->obj_idx, st->n_objs, idx_rebuild_objs) ||
		    grow((void **)&st->objs, &st->cap_objs, st->n_objs + 1, sizeof(*st->objs)))
			return 0;
		st->n_objs++;
	}
	struct st_obj *o = &st->objs[i];
	o->refs = 1;
	o->hash = h;
	o->key = *k;
	st->objs_held++;
	s = h & (st->obj_idx.cap - 1);
	while (st->obj_idx.slots[s])
		s = (s + 1) & (st->obj_idx.cap - 1);
	st->obj_idx.slots[s] = (uint32_t)i + 1;
	return (uint32_t)i + 1;
}

static void obj_ref(struct pp_store *st, uint32_t obj1)
{
	if (obj1)
		st->objs[obj1 - 1].refs++;
}

/* Drops a reference (obj1 = index + 1, 0 = none). Lock held. */
static void obj_put(struct pp_store *st, uint32_t obj1)
{
	if (!obj1)
		return;
	struct st_obj *o = &st->objs[obj1 - 1];
	if (--o->refs)
		return;
	st->objs_held--;
	idx_rebuild_objs(st);
}

static void proc_release_maps(struct pp_store *st, struct st_proc *p)
{
	for (size_t i = 0; p->objs && i < p->maps.n; i++)
		obj_put(st, p->objs[i]);
	pp_maps__free(&p->maps);
	free(p->bids);
	free(p->objs);
	free(p->mix);
	p->bids = NULL;
	p->objs = NULL;
	p->mix = NULL;
}

/*
 * Installs maps (taken) with their build ids and two arrays of maps->n
 * entries (taken, contents set here): the object of each executable file
 * mapping (a reference each) and the mapping interned for it (none yet).
 * Lock held.
 */
static void proc_install_maps(struct pp_store *st, struct st_proc *p, struct pp_maps *maps,
			      struct st_bid *bids, uint32_t *objs, int32_t *mix)
{
	proc_release_maps(st, p);
	p->maps = *maps;
	*maps = (struct pp_maps){ 0 };
	p->bids = bids;
	p->objs = objs;
	p->mix = mix;
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct pp_map *m = &p->maps.v[i];
		mix[i] = -1;
		objs[i] = 0;
		if (!m->path || m->special || !(m->prot & PP_PROT_X))
			continue;
		struct st_bid k;
		obj_key(m, &bids[i], &k);
		objs[i] = obj_get(st, &k);
	}
}

static int proc_intern_mapping(struct pp_store *st, struct st_proc *p, const struct pp_map *m,
			       const struct st_bid *bid, uint32_t obj1)
{
	for (size_t i = 0; i < p->n_mappings; i++) {
		struct st_mapping *x = &p->mappings[i];
		if (x->start == m->start && x->limit == m->end && x->offset == m->offset &&
		    !x->kernel && x->file && m->path && !strcmp(x->file, m->path))
			return (int)i;
	}
	if (grow((void **)&p->mappings, &p->cap_mappings, p->n_mappings + 1, sizeof(*p->mappings)))
		return -1;
	struct st_mapping *x = &p->mappings[p->n_mappings];
	memset(x, 0, sizeof(*x));
	x->start = m->start;
	x->limit = m->end;
	x->offset = m->offset;
	x->prot = m->prot;
	x->dev_major = m->dev_major;
	x->dev_minor = m->dev_minor;
	x->inode = m->inode;
	x->file = xstrdup(m->path);
	x->obj = obj1;
	obj_ref(st, obj1);
	if (bid && bid->len) {
		pp_buildid__hex(bid->id, bid->len, x->build_id);
		memcpy(x->bid, bid->id, bid->len);
		x->bid_len = bid->len;
	}
	return (int)p->n_mappings++;
}

/* The build id of m, read by bids_read before the maps were installed
 * (no I/O here). */
static const struct st_bid *proc_build_id(struct st_proc *p, const struct pp_map *m)
{
	size_t i = (size_t)(m - p->maps.v);
	if (!p->bids || i >= p->maps.n || !p->bids[i].tried)
		return NULL;
	return &p->bids[i];
}

static void bid_stat(struct st_bid *b, const struct stat *sb)
{
	b->stat_ok = true;
	b->dev = sb->st_dev;
	b->ino = sb->st_ino;
	b->size = (uint64_t)sb->st_size;
	b->mtime_ns = (uint64_t)sb->st_mtim.tv_sec * 1000000000ull + (uint64_t)sb->st_mtim.tv_nsec;
}

/* Takes the store lock: the build id of an object already known by the
 * same file identity (stat_ok fields of b), copied into b. */
static bool obj_lookup_stat(struct pp_store *st, struct st_bid *b)
{
	bool found = false;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n_objs && !found; i++) {
		const struct st_bid *k = &st->objs[i].key;
		if (!st->objs[i].refs || !k->stat_ok || k->dev != b->dev || k->ino != b->ino ||
		    k->size != b->size || k->mtime_ns != b->mtime_ns)
			continue;
		b->len = k->len;
		memcpy(b->id, k->id, k->len);
		found = true;
	}
	pthread_mutex_unlock(&st->lock);
	return found;
}

/*
 * Build ids of the executable file mappings of maps, parallel to maps->v.
 * A file the store already holds as an object (same dev, inode, size and
 * mtime, seen with a stat) is not opened again; others are opened once per
 * maps. File I/O: called without the store lock (takes it briefly).
 */
static struct st_bid *bids_read(struct pp_store *st, pid_t pid, const struct pp_maps *maps)
{
	struct st_bid *b = calloc(maps->n ? maps->n : 1, sizeof(*b));
	struct pp_open_budget budget;
	if (!b)
		return NULL;
	pp_open_budget__init(&budget); /* files past it: no build id */
	for (size_t i = 0; i < maps->n; i++) {
		const struct pp_map *m = &maps->v[i];
		b[i].tried = true;
		if (!m->path || m->special || !(m->prot & PP_PROT_X))
			continue;
		size_t j;
		for (j = 0; j < i; j++) {
			const struct pp_map *o = &maps->v[j];
			if (o->inode == m->inode && o->dev_major == m->dev_major &&
			    o->dev_minor == m->dev_minor && o->path && !o->special &&
			    (o->prot & PP_PROT_X))
				break;
		}
		if (j < i) {
			b[i] = b[j];
			continue;
		}
		struct stat sb;
		if (pp_proc__mapped_stat(pid, m, &sb) == 0 && S_ISREG(sb.st_mode)) {
			bid_stat(&b[i], &sb);
			if (obj_lookup_stat(st, &b[i]))
				continue;
		}
		if (!pp_open_budget__take(&budget))
			continue;
		/* open and read on an opener thread, under its deadline (procfs.h) */
		size_t len = 0;
		int r = pp_proc__mapped_buildid(pid, m, b[i].id, &len, &sb);
		if (sb.st_ino) {
			st->file_opens++;
			if (!b[i].stat_ok)
				bid_stat(&b[i], &sb);
		}
		if (r == 0)
			b[i].len = len;
	}
	return b;
}

/* The mapping interned for p's maps entry m (cached in p->mix), -1 on
 * ENOMEM. Lock held. */
static int proc_map_mapping(struct pp_store *st, struct st_proc *p, const struct pp_map *m)
{
	size_t i = (size_t)(m - p->maps.v);
	if (p->mix && i < p->maps.n && p->mix[i] >= 0)
		return p->mix[i];
	int r = proc_intern_mapping(st, p, m, proc_build_id(p, m),
				    p->objs && i < p->maps.n ? p->objs[i] : 0);
	if (p->mix && i < p->maps.n)
		p->mix[i] = r;
	return r;
}

static void proc_find_exe_mapping(struct pp_store *st, struct st_proc *p)
{
	if (p->exe_mapping >= 0 || !p->exe)
		return;
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct pp_map *m = &p->maps.v[i];
		if ((m->prot & PP_PROT_X) && m->path && !strcmp(m->path, p->exe)) {
			int idx = proc_map_mapping(st, p, m);
			if (idx >= 0)
				p->exe_mapping = idx;
			return;
		}
	}
}

struct pp_store *pp_store__new(const struct pp_store_opts *opts, struct pp_symbolizer *sym)
{
	struct pp_store *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->opts = *opts;
	if (!st->opts.max_stacks)
		st->opts.max_stacks = 200000;
	if (!st->opts.max_live)
		st->opts.max_live = 65536;
	if (!st->opts.max_procs)
		st->opts.max_procs = 4096;
	if (!st->opts.cpu_period_ns)
		st->opts.cpu_period_ns = 1000000000ull / 99;
	if (!st->opts.max_locations)
		st->opts.max_locations = st->opts.max_stacks * 4 + 4096;
	if (!st->opts.linger_ns)
		st->opts.linger_ns = 60000000000ull;
	st->sym = sym;
	pthread_mutex_init(&st->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st->work_cond, &ca);
	pthread_cond_init(&st->done_cond, &ca);
	pthread_condattr_destroy(&ca);
	size_t live_cap = 1;
	while (live_cap < (size_t)st->opts.max_live * 2)
		live_cap *= 2;
	st->live_max_cap = live_cap;
	st->live_cap = PP_MIN(live_cap, (size_t)LIVE_MIN_CAP);
	st->live = calloc(st->live_cap, sizeof(*st->live));
	if (!st->live || idx_init(&st->loc_idx, 1024) || idx_init(&st->stack_idx, 1024) ||
	    idx_init(&st->obj_idx, 64)) {
		pp_store__free(st);
		errno = ENOMEM;
		return NULL;
	}
	if (opts->sym_ops) {
		st->ops = opts->sym_ops;
		st->ops_ctx = opts->sym_ctx;
	} else if (sym) {
		st->ops = &symbolizer_ops;
		st->ops_ctx = sym;
	}
	if (st->ops) {
		int r = pthread_create(&st->worker, NULL, worker_main, st);
		if (r) {
			pp_store__free(st);
			errno = r;
			return NULL;
		}
		st->worker_started = true;
	}
	return st;
}

static void free_frames(struct st_frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].function);
		free(f[i].system_name);
		free(f[i].file);
	}
	free(f);
}

static void proc_free(struct pp_store *st, struct st_proc *p)
{
	proc_release_maps(st, p);
	for (size_t j = 0; j < p->n_mappings; j++) {
		free(p->mappings[j].file);
		obj_put(st, p->mappings[j].obj);
	}
	free(p->mappings);
	free(p->threads);
	free(p->names);
	free(p->exe);
	free(p->cmdline);
	memset(p, 0, sizeof(*p));
}

void pp_store__free(struct pp_store *st)
{
	if (!st)
		return;
	if (st->worker_started) {
		pthread_mutex_lock(&st->lock);
		st->worker_stop = true;
		pthread_cond_broadcast(&st->work_cond);
		pthread_mutex_unlock(&st->lock);
		pthread_join(st->worker, NULL);
	}
	free(st->pending);
	pthread_cond_destroy(&st->work_cond);
	pthread_cond_destroy(&st->done_cond);
	for (size_t i = 0; i < st->n_procs; i++)
		proc_free(st, &st->procs[i]);
	free(st->procs);
	for (size_t i = 0; i < st->n_locs; i++)
		free_frames(st->locs[i].frames, st->locs[i].n_frames);
	free(st->locs);
	free(st->free_locs);
	for (size_t i = 0; i < st->n_stacks; i++)
		free(st->stacks[i].locs);
	free(st->stacks);
	free(st->free_stacks);
	/* Snapshots still open (a caller bug) are detached, freed by their owner. */
	for (struct pp_store_snapshot *sn = st->snaps; sn; sn = sn->next)
		sn->st = NULL;
	free(st->loc_idx.slots);
	free(st->obj_idx.slots);
	free(st->objs);
	free(st->stack_idx.slots);
	free(st->live);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* ---- lifecycle ---- */

static void live_remove_proc(struct pp_store *st, uint32_t idx);

/* The process at idx is gone (exit or pid reuse). Lock held. */
static void proc_exited(struct pp_store *st, uint32_t idx)
{
	struct st_proc *p = &st->procs[idx];
	p->alive = false;
	st->n_exited++;
	p->exit_ns = pp_now_mono_ns();
	p->exit_seq = st->snap_seq + 1;
	proc_release_maps(st, p);
	/* Its live allocations are gone with it. */
	live_remove_proc(st, idx);
}

static uint64_t loc_hash(uint32_t kid, uint64_t pc, uint8_t flags);

#define LOC_LEAF 1
#define LOC_KERNEL 2
#define LOC_OBJ 4
#define LOC_FREE 0x80

static void idx_rebuild_stacks(struct pp_store *st)
{
	struct idx_table *t = &st->stack_idx;
	memset(t->slots, 0, t->cap * sizeof(*t->slots));
	for (size_t i = 0; i < st->n_stacks; i++) {
		if (st->stacks[i].kind == KIND_FREE)
			continue;
		size_t s = st->stacks[i].hash & (t->cap - 1);
		while (t->slots[s])
			s = (s + 1) & (t->cap - 1);
		t->slots[s] = (uint32_t)i + 1;
	}
}

static void idx_rebuild_locs(struct pp_store *st)
{
	struct idx_table *t = &st->loc_idx;
	memset(t->slots, 0, t->cap * sizeof(*t->slots));
	for (size_t i = 0; i < st->n_locs; i++) {
		const struct st_loc *l = &st->locs[i];
		if (l->flags & LOC_FREE)
			continue;
		size_t s = loc_hash(l->kid, l->pc, l->flags) & (t->cap - 1);
		while (t->slots[s])
			s = (s + 1) & (t->cap - 1);
		t->slots[s] = (uint32_t)i + 1;
	}
}

static void push_free(uint32_t **arr, size_t *n, size_t *cap, uint32_t i)
{
	/* On ENOMEM the slot is simply not reused. */
	if (!grow((void **)arr, cap, *n + 1, sizeof(**arr)))
		(*arr)[(*n)++] = i;
}

/*
 * Release exited processes that no open snapshot taken before their exit
 * needs and (unless force) that exited at least linger_ns ago: their
 * stacks, locations, thread names and slot. Lock held.
 */
static void gc(struct pp_store *st, uint64_t now, bool force)
{
	uint64_t oldest = UINT64_MAX;
	size_t n = 0;

	if (st->renders)
		return; /* a render reads stacks, locations and names without the lock */
	st->last_gc_ns = now;
	for (const struct pp_store_snapshot *sn = st->snaps; sn; sn = sn->next)
		oldest = PP_MIN(oldest, sn->seq);
	for (size_t i = 0; i < st->n_procs; i++) {
		struct st_proc *p = &st->procs[i];
		if (!p->used || p->alive || oldest < p->exit_seq)
			continue;
		if (!force && now - p->exit_ns < st->opts.linger_ns)
			continue;
		p->release = true;
		n++;
	}
	if (!n)
		return;
	for (size_t i = 0; i < st->n_stacks; i++) {
		struct st_stack *x = &st->stacks[i];
		if (x->kind == KIND_FREE || !st->procs[x->proc].release)
			continue;
		for (uint32_t k = 0; k < x->n; k++)
			st->locs[x->locs[k]].refs--;
		free(x->locs);
		memset(x, 0, sizeof(*x));
		x->kind = KIND_FREE;
		push_free(&st->free_stacks, &st->n_free_stacks, &st->cap_free_stacks, (uint32_t)i);
	}
	/*
	 * A location goes with the last stack using it once the process that
	 * made it is released; shared ones (objects, kernel) still used by
	 * other processes' stacks stay, without a process until one takes
	 * them over (their names are kept; one still queued stays unnamed).
	 */
	for (size_t i = 0; i < st->n_locs; i++) {
		struct st_loc *l = &st->locs[i];
		if ((l->flags & LOC_FREE) || (l->proc != NO_PROC && !st->procs[l->proc].release))
			continue;
		if (l->refs) {
			l->proc = NO_PROC;
			l->pending = false;
			if (l->mapping != KERNEL_MAPPING)
				l->mapping = -1;
			continue;
		}
		obj_put(st, l->obj);
		free_frames(l->frames, l->n_frames);
		memset(l, 0, sizeof(*l));
		l->flags = LOC_FREE;
		push_free(&st->free_locs, &st->n_free_locs, &st->cap_free_locs, (uint32_t)i);
	}
	for (size_t i = 0; i < st->n_procs; i++) {
		if (!st->procs[i].release)
			continue;
		proc_free(st, &st->procs[i]);
		st->procs_held--;
		st->n_exited--;
		st->stats.released_procs++;
	}
	idx_rebuild_stacks(st);
	idx_rebuild_locs(st);
}

/* Periodic pass from the process paths. Lock held. */
static void gc_maybe(struct pp_store *st)
{
	uint64_t now = pp_now_mono_ns();
	if (now - st->last_gc_ns >= GC_INTERVAL_NS)
		gc(st, now, false);
}

/* A cap is reached: release the exited processes no snapshot needs,
 * lingering or not. Walks the processes (the stacks and locations only
 * when one is released). Lock held. */
static void gc_at_cap(struct pp_store *st)
{
	if (st->n_exited)
		gc(st, pp_now_mono_ns(), true);
}

int pp_store__process_update(struct pp_store *st, const struct pp_proc_info *info,
			     struct pp_maps *maps, int group)
{
	int r = 0;
	struct st_bid *bids = NULL;
	uint32_t *objs = NULL;
	int32_t *mix = NULL;
	if (maps) {
		bids = bids_read(st, info->pid, maps);
		objs = calloc(maps->n ? maps->n : 1, sizeof(*objs));
		mix = calloc(maps->n ? maps->n : 1, sizeof(*mix));
		if (!bids || !objs || !mix) {
			free(bids);
			free(objs);
			free(mix);
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&st->lock);
	uint32_t idx;
	struct st_proc *p = proc_find(st, info->pid, &idx);
	if (p && p->start_time != info->start_time) {
		proc_exited(st, idx); /* pid reused */
		p = NULL;
	}
	gc_maybe(st);
	if (!p) {
		if (st->procs_held >= st->opts.max_procs)
			gc_at_cap(st);
		if (st->procs_held >= st->opts.max_procs) {
			st->stats.dropped_procs++;
			r = -ENOSPC;
			goto out;
		}
		size_t i;
		for (i = 0; i < st->n_procs; i++)
			if (!st->procs[i].used)
				break;
		if (i == st->n_procs) {
			if (st->n_procs >= UINT32_MAX - 1 ||
			    grow((void **)&st->procs, &st->cap_procs, st->n_procs + 1,
				 sizeof(*st->procs))) {
				r = -ENOMEM;
				goto out;
			}
			st->n_procs++;
		}
		p = &st->procs[i];
		memset(p, 0, sizeof(*p));
		st->procs_held++;
		p->used = true;
		p->pid = info->pid;
		p->start_time = info->start_time;
		p->alive = true;
		p->exe_mapping = -1;
	}
	memcpy(p->comm, info->comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
	snprintf(p->container_id, sizeof(p->container_id), "%s", info->container_id);
	snprintf(p->container, sizeof(p->container), "%s", info->container);
	if (info->exe && (!p->exe || strcmp(p->exe, info->exe))) {
		free(p->exe);
		p->exe = strdup(info->exe);
		p->exe_mapping = -1; /* exec: a new main executable */
	}
	if (info->cmdline) {
		char *c = malloc(info->cmdline_len + 1);
		if (c) {
			memcpy(c, info->cmdline, info->cmdline_len);
			c[info->cmdline_len] = '\0';
			free(p->cmdline);
			p->cmdline = c;
			p->cmdline_len = info->cmdline_len;
		}
	}
	p->group = group;
	if (maps) {
		proc_install_maps(st, p, maps, bids, objs, mix);
		bids = NULL;
		objs = NULL;
		mix = NULL;
		proc_find_exe_mapping(st, p);
	}
out:
	pthread_mutex_unlock(&st->lock);
	free(bids);
	free(objs);
	free(mix);
	return r;
}

void pp_store__process_exit(struct pp_store *st, pid_t pid)
{
	uint32_t idx;
	pthread_mutex_lock(&st->lock);
	if (proc_find(st, pid, &idx))
		proc_exited(st, idx);
	gc_maybe(st);
	pthread_mutex_unlock(&st->lock);
}

void pp_store__collect(struct pp_store *st)
{
	pthread_mutex_lock(&st->lock);
	gc(st, pp_now_mono_ns(), false);
	pthread_mutex_unlock(&st->lock);
}

bool pp_store__has_process(struct pp_store *st, pid_t pid)
{
	pthread_mutex_lock(&st->lock);
	bool r = proc_find(st, pid, NULL) != NULL;
	pthread_mutex_unlock(&st->lock);
	return r;
}

void pp_store__forget_threads(struct pp_store *st, pid_t pid)
{
	pthread_mutex_lock(&st->lock);
	struct st_proc *p = proc_find(st, pid, NULL);
	if (p)
		p->n_threads = 0;
	pthread_mutex_unlock(&st->lock);
}

void pp_store__set_thread_name(struct pp_store *st, pid_t pid, pid_t tid, const char *name)
{
	pthread_mutex_lock(&st->lock);
	struct st_proc *p = proc_find(st, pid, NULL);
	if (p) {
		size_t i;
		for (i = 0; i < p->n_threads; i++)
			if (p->threads[i].tid == tid)
				break;
		if (i == p->n_threads && p->n_threads < 65536 &&
		    !grow((void **)&p->threads, &p->cap_threads, p->n_threads + 1,
			  sizeof(*p->threads))) {
			p->threads[i].tid = tid;
			p->n_threads++;
		}
		if (i < p->n_threads)
			snprintf(p->threads[i].name, sizeof(p->threads[i].name), "%s", name);
	}
	pthread_mutex_unlock(&st->lock);
}

static const char *thread_name(const struct st_proc *p, pid_t tid)
{
	for (size_t i = 0; i < p->n_threads; i++)
		if (p->threads[i].tid == tid)
			return p->threads[i].name;
	return NULL;
}

/* 1 + index of tid's thread name among p's distinct names; 0 if unknown. */
static pid_t thread_name_key(struct st_proc *p, pid_t tid)
{
	const char *name = thread_name(p, tid);
	if (!name || !*name)
		return 0;
	for (size_t i = 0; i < p->n_names; i++)
		if (!strcmp(p->names[i], name))
			return (pid_t)i + 1;
	if (p->n_names >= 4096 ||
	    grow((void **)&p->names, &p->cap_names, p->n_names + 1, sizeof(*p->names)))
		return 0;
	snprintf(p->names[p->n_names], sizeof(p->names[0]), "%s", name);
	return (pid_t)++p->n_names;
}

/* ---- locations ---- */

static void copy_sym(struct st_loc *l, const struct pp_sym_result *res)
{
	l->frames = calloc(res->n, sizeof(*l->frames));
	if (!l->frames)
		return;
	for (size_t i = 0; i < res->n; i++) {
		l->frames[i].function = xstrdup(res->frames[i].function);
		l->frames[i].system_name = xstrdup(res->frames[i].system_name);
		l->frames[i].file = xstrdup(res->frames[i].file);
		l->frames[i].line = res->frames[i].line;
		l->frames[i].start_line = res->frames[i].start_line;
	}
	l->n_frames = (uint32_t)res->n;
	l->has_function = res->has_function;
	l->has_file = res->has_file;
	l->has_line = res->has_line;
	l->has_inline = res->has_inline;
}

/*
 * A new location: its mapping from the maps held (no I/O), then queued for
 * the worker, which symbolizes it outside the lock. Lock held.
 */
static void loc_prepare(struct pp_store *st, struct st_proc *p, struct st_loc *l, uint32_t li,
			bool kernel, const struct pp_map *m)
{
	l->serial = ++st->loc_serial;
	if (kernel)
		l->mapping = KERNEL_MAPPING;
	else
		l->mapping = m && m->path && !m->special ? proc_map_mapping(st, p, m) : -1;
	if (!st->worker_started ||
	    grow((void **)&st->pending, &st->cap_pending, st->n_pending + 1, sizeof(*st->pending)))
		return; /* stays address-only */
	st->pending[st->n_pending++] = li;
	l->pending = true;
	st->enq_count++;
	pthread_cond_signal(&st->work_cond);
}

enum job_kind { JOB_NONE, JOB_KERNEL, JOB_FILE, JOB_JIT, JOB_MAPS };

struct sym_job {
	uint32_t li, pidx;
	uint64_t serial, start_time, addr;
	pid_t pid;
	enum job_kind kind;
	struct pp_map m; /* JOB_FILE; m.path owned */
	struct st_bid bid;
	struct pp_maps nm; /* JOB_MAPS: the maps read again, and their build ids */
	struct st_bid *nbids;
	uint32_t *nobjs;
	int32_t *nmix;
	struct pp_sym_result res;
	int rc;
};

#define JOB_BATCH 256

/* Lock held: describe queued location li as a job (copies, no I/O). */
static void job_build(struct pp_store *st, uint32_t li, struct sym_job *j, uint64_t now)
{
	memset(j, 0, sizeof(*j));
	j->rc = -ENOENT;
	struct st_loc *l = &st->locs[li];
	if ((l->flags & LOC_FREE) || !l->pending || l->proc == NO_PROC)
		return;
	struct st_proc *p = &st->procs[l->proc];
	j->li = li;
	j->serial = l->serial;
	j->pidx = l->proc;
	j->pid = p->pid;
	j->start_time = p->start_time;
	j->addr = l->addr;
	if (l->mapping == -1 && p->maps.n) {
		/* Maps read since it was interned may have its file now. */
		const struct pp_map *m = pp_maps__find(&p->maps, l->addr);
		if (m && m->path && !m->special)
			l->mapping = proc_map_mapping(st, p, m);
	}
	if (l->mapping == KERNEL_MAPPING) {
		j->kind = JOB_KERNEL;
	} else if (l->mapping >= 0 && (size_t)l->mapping < p->n_mappings) {
		const struct st_mapping *x = &p->mappings[l->mapping];
		j->m = (struct pp_map){ .start = x->start,
					.end = x->limit,
					.offset = x->offset,
					.prot = x->prot,
					.dev_major = x->dev_major,
					.dev_minor = x->dev_minor,
					.inode = x->inode,
					.path = xstrdup(x->file) };
		j->bid.len = x->bid_len;
		memcpy(j->bid.id, x->bid, x->bid_len);
		j->kind = j->m.path ? JOB_FILE : JOB_NONE;
	} else if (p->maps.n && pp_maps__find(&p->maps, l->addr)) {
		j->kind = JOB_JIT; /* anonymous or special memory */
	} else if (p->alive && now - p->maps_read_ns > 20000000ull) {
		/* Mapped since the maps were read (dlopen, a new thread
		 * stack...): read them again, at most every 20 ms. */
		p->maps_read_ns = now;
		j->kind = JOB_MAPS;
	}
}

/* No lock: the file and /proc work of one job. */
static void job_run(struct pp_store *st, struct sym_job *j)
{
	const struct pp_store_sym_ops *o = st->ops;
	void *sym = st->ops_ctx;

	switch (j->kind) {
	case JOB_KERNEL:
		j->rc = o->resolve_kernel(sym, j->addr, &j->res);
		break;
	case JOB_FILE:
		j->rc = o->resolve(sym, j->pid, &j->m, j->bid.len ? j->bid.id : NULL, j->bid.len,
				   j->addr, &j->res);
		break;
	case JOB_JIT:
		j->rc = o->resolve_jit(sym, j->pid, j->addr, &j->res);
		break;
	case JOB_MAPS: {
		if (pp_maps__read(j->pid, &j->nm) < 0)
			break;
		j->nbids = bids_read(st, j->pid, &j->nm);
		j->nobjs = calloc(j->nm.n ? j->nm.n : 1, sizeof(*j->nobjs));
		j->nmix = calloc(j->nm.n ? j->nm.n : 1, sizeof(*j->nmix));
		const struct pp_map *m = pp_maps__find(&j->nm, j->addr);
		if (!m || !j->nbids || !j->nobjs || !j->nmix)
			break;
		if (!m->path || m->special) {
			j->rc = o->resolve_jit(sym, j->pid, j->addr, &j->res);
			break;
		}
		const struct st_bid *b = &j->nbids[m - j->nm.v];
		j->rc = o->resolve(sym, j->pid, m, b->len ? b->id : NULL, b->len, j->addr, &j->res);
		break;
	}
	default:
		break;
	}
}

/* Lock held: write one job's result back, if its location is still there. */
static void job_commit(struct pp_store *st, struct sym_job *j)
{
	st->done_count++;
	if (!j->serial)
		return; /* the location was gone when the job was built */
	struct st_loc *l = &st->locs[j->li];
	if ((l->flags & LOC_FREE) || l->serial != j->serial)
		return;
	struct st_proc *p = &st->procs[j->pidx];
	if (j->kind == JOB_NONE && l->mapping == -1 && p->alive && p->maps.n) {
		/* Skipped as the maps were being read again (by a job of this
		 * batch, committed first): resolve it with them. */
		const struct pp_map *m = pp_maps__find(&p->maps, l->addr);
		if (m && !grow((void **)&st->pending, &st->cap_pending, st->n_pending + 1,
			       sizeof(*st->pending))) {
			if (m->path && !m->special)
				l->mapping = proc_map_mapping(st, p, m);
			st->pending[st->n_pending++] = j->li;
			st->done_count--; /* still to do: renders keep waiting for it */
			return;
		}
	}
	if (j->kind == JOB_MAPS && j->nbids && j->nobjs && j->nmix && p->used && p->alive &&
	    p->start_time == j->start_time) {
		proc_install_maps(st, p, &j->nm, j->nbids, j->nobjs, j->nmix);
		j->nbids = NULL;
		j->nobjs = NULL;
		j->nmix = NULL;
		const struct pp_map *m = pp_maps__find(&p->maps, l->addr);
		if (m && m->path && !m->special)
			l->mapping = proc_map_mapping(st, p, m);
		proc_find_exe_mapping(st, p);
	}
	if (j->rc == 0 && j->res.n && !l->frames)
		copy_sym(l, &j->res);
	l->pending = false;
}

static void job_free(struct sym_job *j)
{
	free(j->m.path);
	pp_maps__free(&j->nm);
	free(j->nbids);
	free(j->nobjs);
	free(j->nmix);
	pp_sym_result__free(&j->res);
}

static void *worker_main(void *arg)
{
	struct pp_store *st = arg;
	struct sym_job *jobs = calloc(JOB_BATCH, sizeof(*jobs));

	pthread_mutex_lock(&st->lock);
	while (!st->worker_stop) {
		if (!st->n_pending || !jobs) {
			pthread_cond_wait(&st->work_cond, &st->lock);
			continue;
		}
		size_t n = PP_MIN(st->n_pending, (size_t)JOB_BATCH);
		uint64_t now = pp_now_mono_ns();
		for (size_t i = 0; i < n; i++)
			job_build(st, st->pending[i], &jobs[i], now);
		memmove(st->pending, st->pending + n, (st->n_pending - n) * sizeof(*st->pending));
		st->n_pending -= n;
		pthread_mutex_unlock(&st->lock);
		for (size_t i = 0; i < n; i++)
			job_run(st, &jobs[i]);
		pthread_mutex_lock(&st->lock);
		/* Maps read again first: the batch's other misses use them. */
		for (size_t i = 0; i < n; i++)
			if (jobs[i].kind == JOB_MAPS)
				job_commit(st, &jobs[i]);
		for (size_t i = 0; i < n; i++)
			if (jobs[i].kind != JOB_MAPS)
				job_commit(st, &jobs[i]);
		pthread_cond_broadcast(&st->done_cond);
		pthread_mutex_unlock(&st->lock);
		for (size_t i = 0; i < n; i++)
			job_free(&jobs[i]);
		pthread_mutex_lock(&st->lock);
	}
	pthread_mutex_unlock(&st->lock);
	free(jobs);
	return NULL;
}

/* Wait (at most timeout_ns) until every location queued so far has been
 * through the worker. Takes the store lock. */
static void wait_symbolized(struct pp_store *st, uint64_t timeout_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t end = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + timeout_ns;
	ts.tv_sec = (time_t)(end / 1000000000ull);
	ts.tv_nsec = (long)(end % 1000000000ull);
	pthread_mutex_lock(&st->lock);
	uint64_t target = st->enq_count;
	while (st->worker_started && st->done_count < target)
		if (pthread_cond_timedwait(&st->done_cond, &st->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&st->lock);
}

/* struct st_loc has no stored hash; recompute from its key. */
static uint64_t loc_hash(uint32_t kid, uint64_t pc, uint8_t flags)
{
	uint64_t k[3] = { kid, pc, flags };
	return pp_hash_bytes(k, sizeof(k), 7);
}

/* Doubles t when one more of n entries would fill it past half, then rebuilds it. */
static int idx_grow(struct pp_store *st, struct idx_table *t, size_t n,
		    void (*rebuild)(struct pp_store *st))
{
	if ((n + 1) * 2 <= t->cap)
		return 0;
	size_t nc = t->cap * 2;
	uint32_t *ns = calloc(nc, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	free(t->slots);
	t->slots = ns;
	t->cap = nc;
	rebuild(st);
	return 0;
}

/*
 * Returns loc index or -ENOSPC (cap) / -ENOMEM. leaf: pc is the exact IP
 * (else a return address). A pc in an executable file mapping of the maps
 * held is keyed by (object, file offset): one location for every process
 * mapping that file. Lock held.
 */
static int64_t loc_intern(struct pp_store *st, uint32_t pidx, uint64_t pc, bool leaf, bool kernel)
{
	struct st_proc *p = &st->procs[pidx];
	uint8_t flags = (leaf ? LOC_LEAF : 0) | (kernel ? LOC_KERNEL : 0);
	uint64_t addr = leaf ? pc : pc - 1;
	uint32_t kid = kernel ? NO_PROC : pidx;
	uint64_t kpc = pc;
	const struct pp_map *m = NULL;
	uint32_t obj1 = 0;

	if (!kernel && p->maps.n) {
		m = pp_maps__find(&p->maps, addr);
		size_t mi = m ? (size_t)(m - p->maps.v) : 0;
		if (m && p->objs && p->objs[mi]) {
			obj1 = p->objs[mi];
			kid = obj1 - 1;
			kpc = pc - m->start + m->offset;
			flags |= LOC_OBJ;
		}
	}
	uint64_t h = loc_hash(kid, kpc, flags);
	size_t s = h & (st->loc_idx.cap - 1);
	while (st->loc_idx.slots[s]) {
		struct st_loc *l = &st->locs[st->loc_idx.slots[s] - 1];
		if (l->kid == kid && l->pc == kpc && l->flags == flags) {
			if (!(flags & (LOC_OBJ | LOC_KERNEL)))
				return st->loc_idx.slots[s] - 1;
			/* Shared: this process's mapping is needed to render it. */
			int mapping = obj1 ? proc_map_mapping(st, p, m) : KERNEL_MAPPING;
			if (obj1 && mapping < 0)
				return -ENOMEM;
			if (l->proc == NO_PROC || !st->procs[l->proc].alive) {
				/* Its process exited: this one takes it over. */
				l->proc = pidx;
				l->mapping = mapping;
				l->addr = addr;
			}
			return st->loc_idx.slots[s] - 1;
		}
		s = (s + 1) & (st->loc_idx.cap - 1);
	}
	if (st->n_locs - st->n_free_locs >= st->opts.max_locations)
		gc_at_cap(st);
	if (st->n_locs - st->n_free_locs >= st->opts.max_locations)
		return -ENOSPC;
	size_t li;
	if (st->n_free_locs) {
		li = st->free_locs[--st->n_free_locs];
	} else {
		if (st->n_locs >= UINT32_MAX - 1 ||
		    idx_grow(st, &st->loc_idx, st->n_locs, idx_rebuild_locs) ||
		    grow((void **)&st->locs, &st->cap_locs, st->n_locs + 1, sizeof(*st->locs)))
			return -ENOMEM;
		li = st->n_locs++;
	}
	struct st_loc *l = &st->locs[li];
	memset(l, 0, sizeof(*l));
	l->proc = pidx;
	l->kid = kid;
	l->pc = kpc;
	l->flags = flags;
	l->addr = addr;
	if (obj1) {
		l->obj = obj1;
		obj_ref(st, obj1);
		l->off = addr - m->start + m->offset;
	}
	loc_prepare(st, p, l, (uint32_t)li, kernel, m);
	s = h & (st->loc_idx.cap - 1);
	while (st->loc_idx.slots[s])
		s = (s + 1) & (st->loc_idx.cap - 1);
	st->loc_idx.slots[s] = (uint32_t)li + 1;
	return (int64_t)li;
}

/* ---- stacks ---- */

static uint64_t stack_hash(uint8_t kind, uint32_t proc, pid_t tid, uint64_t size,
			   const uint32_t *locs, uint32_t n)
{
	uint64_t k[4] = { kind, proc, (uint64_t)(uint32_t)tid, size };
	uint64_t h = pp_hash_bytes(k, sizeof(k), 11);
	return pp_hash_bytes(locs, n * sizeof(*locs), h);
}

static int64_t stack_intern(struct pp_store *st, uint8_t kind, uint32_t pidx, pid_t tid,
			    uint64_t size, const uint32_t *locs, uint32_t n)
{
	uint64_t h = stack_hash(kind, pidx, tid, size, locs, n);
	size_t s = h & (st->stack_idx.cap - 1);
	while (st->stack_idx.slots[s]) {
		struct st_stack *x = &st->stacks[st->stack_idx.slots[s] - 1];
		if (x->hash == h && x->kind == kind && x->proc == pidx && x->tid == tid &&
		    x->size == size && x->n == n && !memcmp(x->locs, locs, n * sizeof(*locs)))
			return st->stack_idx.slots[s] - 1;
		s = (s + 1) & (st->stack_idx.cap - 1);
	}
	if (st->n_stacks - st->n_free_stacks >= st->opts.max_stacks)
		gc_at_cap(st);
	if (st->n_stacks - st->n_free_stacks >= st->opts.max_stacks) {
		st->stats.dropped_stacks++;
		return -1;
	}
	uint32_t *copy = malloc((n ? n : 1) * sizeof(*locs));
	if (!copy)
		return -1;
	size_t si;
	if (st->n_free_stacks) {
		si = st->free_stacks[--st->n_free_stacks];
	} else {
		if (st->n_stacks >= UINT32_MAX - 1 ||
		    idx_grow(st, &st->stack_idx, st->n_stacks, idx_rebuild_stacks) ||
		    grow((void **)&st->stacks, &st->cap_stacks, st->n_stacks + 1,
			 sizeof(*st->stacks))) {
			free(copy);
			return -1;
		}
		si = st->n_stacks++;
	}
	struct st_stack *x = &st->stacks[si];
	memset(x, 0, sizeof(*x));
	x->locs = copy;
	memcpy(x->locs, locs, n * sizeof(*locs));
	for (uint32_t k = 0; k < n; k++)
		st->locs[locs[k]].refs++;
	x->id = ++st->next_stack_id;
	x->kind = kind;
	x->proc = pidx;
	x->tid = tid;
	x->size = size;
	x->n = n;
	x->hash = h;
	s = h & (st->stack_idx.cap - 1);
	while (st->stack_idx.slots[s])
		s = (s + 1) & (st->stack_idx.cap - 1);
	st->stack_idx.slots[s] = (uint32_t)si + 1;
	return (int64_t)si;
}

/* Called with the lock held. Returns the stack index or -1. */
static int64_t add_stack(struct pp_store *st, uint8_t kind, pid_t pid, pid_t tid, uint64_t size,
			 const uint64_t *pcs, size_t n, const uint64_t *kpcs, size_t nk)
{
	uint32_t pidx;
	uint32_t locs[MAX_FRAMES];
	uint32_t nl = 0;

	struct st_proc *p = proc_find(st, pid, &pidx);
	if (!p)
		return -1;
	if (tid > 0)
		tid = thread_name_key(p, tid);
	/* A stack missing frames would be wrong: without room for a new
	 * location the sample is dropped (and counted). */
	for (size_t i = 0; i < nk && nl < MAX_FRAMES; i++) {
		int64_t l = loc_intern(st, pidx, kpcs[i], i == 0, true);
		if (l < 0)
			goto drop;
		locs[nl++] = (uint32_t)l;
	}
	for (size_t i = 0; i < n && nl < MAX_FRAMES; i++) {
		if (!pcs[i])
			continue;
		int64_t l = loc_intern(st, pidx, pcs[i], i == 0 && nk == 0, false);
		if (l < 0)
			goto drop;
		locs[nl++] = (uint32_t)l;
	}
	return stack_intern(st, kind, pidx, tid, size, locs, nl);
drop:
	st->stats.dropped_locations++;
	return -1;
}

int pp_store__add_cpu(struct pp_store *st, pid_t pid, pid_t tid, const uint64_t *pcs, size_t n,
		      const uint64_t *kpcs, size_t nk, uint64_t weight_ns)
{
	int r = 0;
	pthread_mutex_lock(&st->lock);
	int64_t s = add_stack(st, PP_PROFILE_CPU, pid, tid, 0, pcs, n, kpcs, nk);
	if (s < 0) {
		r = -ENOSPC;
	} else {
		st->stacks[s].v[0] += 1;
		st->stacks[s].v[1] += (int64_t)weight_ns;
		stack_touch(st, &st->stacks[s]);
		st->stats.cpu_samples++;
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

static struct st_live *live_slot(struct pp_store *st, uint32_t proc1, uint64_t addr, bool *found)
{
	size_t mask = st->live_cap - 1;
	size_t h = pp_hash_bytes(&addr, 8, proc1) & mask;
	while (st->live[h].proc1) {
		if (st->live[h].proc1 == proc1 && st->live[h].addr == addr) {
			*found = true;
			return &st->live[h];
		}
		h = (h + 1) & mask;
	}
	*found = false;
	return &st->live[h];
}

/* live_slot of addr in pid's process (index in *ret_pidx); NULL when pid is unknown. */
static struct st_live *live_lookup(struct pp_store *st, pid_t pid, uint64_t addr,
				   uint32_t *ret_pidx, bool *found)
{
	if (!proc_find(st, pid, ret_pidx))
		return NULL;
	return live_slot(st, *ret_pidx + 1, addr, found);
}

static void live_delete(struct pp_store *st, struct st_live *e)
{
	size_t mask = st->live_cap - 1;
	size_t i = (size_t)(e - st->live);
	size_t j = i;
	st->live[i].proc1 = 0;
	st->n_live--;
	/* Backward-shift deletion keeps probe chains intact. */
	for (;;) {
		j = (j + 1) & mask;
		if (!st->live[j].proc1)
			break;
		size_t k = pp_hash_bytes(&st->live[j].addr, 8, st->live[j].proc1) & mask;
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			st->live[i] = st->live[j];
			st->live[j].proc1 = 0;
			i = j;
		}
	}
}

/* Takes a live object out of its stack's in-use count and bytes. */
static void live_unaccount(struct pp_store *st, const struct st_live *e)
{
	struct st_stack *s = &st->stacks[e->stack];
	s->v[2] -= 1;
	s->v[3] -= (int64_t)e->size;
	stack_touch(st, s);
}

/* Rehashes the live table into cap slots (a power of two above twice the
 * entries kept), leaving out the entries of process index drop (or none:
 * UINT32_MAX). -ENOMEM leaves it as it was. */
static int live_rehash(struct pp_store *st, size_t cap, uint32_t drop)
{
	struct st_live *nl = calloc(cap, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	struct st_live *old = st->live;
	size_t old_cap = st->live_cap;
	st->live = nl;
	st->live_cap = cap;
	st->n_live = 0;
	for (size_t i = 0; i < old_cap; i++) {
		struct st_live *e = &old[i];
		if (!e->proc1 || e->proc1 == drop + 1)
			continue;
		size_t h = pp_hash_bytes(&e->addr, 8, e->proc1) & (cap - 1);
		while (nl[h].proc1)
			h = (h + 1) & (cap - 1);
		nl[h] = *e;
		st->n_live++;
	}
	free(old);
	return 0;
}

static void live_remove_proc(struct pp_store *st, uint32_t idx)
{
	size_t gone = 0;
	for (size_t i = 0; i < st->live_cap; i++) {
		struct st_live *e = &st->live[i];
		if (e->proc1 == idx + 1) {
			live_unaccount(st, e);
			gone++;
		}
	}
	if (!gone)
		return;
	/* Rebuild the table without this process' entries, smaller if they were most. */
	size_t keep = st->n_live - gone, cap = LIVE_MIN_CAP;
	while (cap < st->live_cap && cap < keep * 4)
		cap *= 2;
	if (live_rehash(st, PP_MIN(cap, st->live_cap), idx) == 0)
		return;
	/* Delete in place (slower, cannot fail). */
	for (size_t i = 0; i < st->live_cap;) {
		if (st->live[i].proc1 == idx + 1)
			live_delete(st, &st->live[i]);
		else
			i++;
	}
}

int pp_store__heap_alloc(struct pp_store *st, pid_t pid, pid_t tid, const uint64_t *pcs, size_t n,
			 uint64_t addr, uint64_t size)
{
	int r = 0;
	uint32_t pidx;
	bool found;
	pthread_mutex_lock(&st->lock);
	/* Half full: double (the pages of a table sized for max_live at once would all be
	 * touched by a few thousand entries spread over it). */
	if (st->n_live * 2 >= st->live_cap && st->live_cap < st->live_max_cap)
		live_rehash(st, st->live_cap * 2, UINT32_MAX);
	struct st_live *e = live_lookup(st, pid, addr, &pidx, &found);
	if (!e) {
		r = -ESRCH;
		goto out;
	}
	if (found) {
		/* A free we never saw (e.g. dropped): the old object is gone. */
		live_unaccount(st, e);
		live_delete(st, e);
		st->stats.unknown_frees++;
		e = live_slot(st, pidx + 1, addr, &found);
	}
	int64_t s = add_stack(st, PP_PROFILE_HEAP, pid, 0, size, pcs, n, NULL, 0);
	if (s < 0) {
		r = -ENOSPC;
		goto out;
	}
	struct st_stack *x = &st->stacks[s];
	x->v[0] += 1;
	x->v[1] += (int64_t)size;
	stack_touch(st, x);
	st->stats.heap_samples++;
	/* (a table that could not grow keeps a free slot: probes end) */
	if (st->n_live >= st->opts.max_live || st->n_live + 1 >= st->live_cap) {
		st->stats.dropped_live++;
		goto out;
	}
	x->v[2] += 1;
	x->v[3] += (int64_t)size;
	e->proc1 = pidx + 1;
	e->addr = addr;
	e->size = size;
	e->stack = (uint32_t)s;
	st->n_live++;
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

int pp_store__heap_free(struct pp_store *st, pid_t pid, uint64_t addr)
{
	int r = 0;
	uint32_t pidx;
	bool found;
	pthread_mutex_lock(&st->lock);
	struct st_live *e = live_lookup(st, pid, addr, &pidx, &found);
	if (!e) {
		r = -ESRCH;
		goto out;
	}
	if (!found) {
		st->stats.unknown_frees++;
		r = -ENOENT;
		goto out;
	}
	live_unaccount(st, e);
	live_delete(st, e);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

int pp_store__add_contention(struct pp_store *st, enum pp_profile_kind kind, pid_t pid, pid_t tid,
			     const uint64_t *pcs, size_t n, int64_t count, int64_t delay_ns)
{
	int r = 0;
	if (kind != PP_PROFILE_BLOCK && kind != PP_PROFILE_MUTEX)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	int64_t s = add_stack(st, (uint8_t)kind, pid, tid, 0, pcs, n, NULL, 0);
	if (s < 0) {
		r = -ENOSPC;
	} else {
		st->stacks[s].v[0] += count;
		st->stacks[s].v[1] += delay_ns;
		stack_touch(st, &st->stacks[s]);
		st->stats.contention_samples++;
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

int pp_store__gauge_begin(struct pp_store *st, enum pp_profile_kind kind)
{
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n_stacks; i++)
		if (st->stacks[i].kind == kind) {
			memset(st->stacks[i].v, 0, sizeof(st->stacks[i].v));
			stack_touch(st, &st->stacks[i]);
		}
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int pp_store__gauge_add(struct pp_store *st, enum pp_profile_kind kind, pid_t pid, pid_t tid,
			const uint64_t *pcs, size_t n)
{
	int r = 0;
	pthread_mutex_lock(&st->lock);
	/* Gauges aggregate identical stacks across threads (like goroutines). */
	int64_t s = add_stack(st, (uint8_t)kind, pid, 0, 0, pcs, n, NULL, 0);
	(void)tid;
	if (s < 0)
		r = -ENOSPC;
	else {
		st->stacks[s].v[0] += 1;
		stack_touch(st, &st->stacks[s]);
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

void pp_store__gauge_end(struct pp_store *st, enum pp_profile_kind kind)
{
	(void)st;
	(void)kind;
}

static int cmp_snap_id(const void *a, const void *b)
{
	const struct snap_val *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The newest full snapshot of kind (the base of overlays). Lock held. */
static struct pp_store_snapshot *snap_full(struct pp_store *st, enum pp_profile_kind kind)
{
	for (struct pp_store_snapshot *sn = st->snaps; sn; sn = sn->next)
		if (sn->kind == kind && !sn->parent)
			return sn;
	return NULL;
}

/*
 * A new snapshot of kind, linked: an overlay on the newest full snapshot
 * of kind when at most half of its stacks changed since, else a full
 * copy. NULL with errno EAGAIN over max_snapshot_bytes. Lock held.
 */
static struct pp_store_snapshot *__snap_take(struct pp_store *st, enum pp_profile_kind kind)
{
	uint8_t sk = stack_kind_for(kind);
	struct pp_store_snapshot *full = snap_full(st, kind);
	size_t n = 0, changed = 0;

	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *x = &st->stacks[i];
		if (x->kind != sk)
			continue;
		n++;
		changed += full && x->mgen > full->gen;
	}
	if (full && changed > full->n / 2)
		full = NULL; /* a new base costs about as much as the overlay */
	size_t keep = full ? changed : n;
	size_t bytes = sizeof(struct pp_store_snapshot) + keep * sizeof(struct snap_val);
	if (st->opts.max_snapshot_bytes && st->snap_bytes + bytes > st->opts.max_snapshot_bytes) {
		st->stats.snapshots_refused++;
		errno = EAGAIN;
		return NULL;
	}
	struct pp_store_snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->v = malloc((keep ? keep : 1) * sizeof(*s->v));
	if (!s->v) {
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < st->n_stacks && s->n < keep; i++) {
		const struct st_stack *x = &st->stacks[i];
		if (x->kind != sk || (full && x->mgen <= full->gen))
			continue;
		s->v[s->n].id = x->id;
		memcpy(s->v[s->n].v, x->v, sizeof(x->v));
		s->n++;
	}
	if (full) {
		full->refs++;
		s->parent = full;
		st->stats.snapshot_shares++;
	}
	s->kind = kind;
	s->time_ns = pp_now_real_ns();
	s->gen = st->gen;
	s->bytes = bytes;
	s->refs = 1;
	s->st = st;
	s->seq = ++st->snap_seq;
	s->next = st->snaps;
	if (st->snaps)
		st->snaps->prev = s;
	st->snaps = s;
	st->snap_bytes += bytes;
	return s;
}

/*
 * Sorting under the lock keeps a snapshot immutable once another can see
 * it. It is O(changed log changed) for an overlay; a full copy is sorted
 * under the lock too (the same order of cost as the copy made under it).
 */
struct pp_store_snapshot *pp_store__snapshot(struct pp_store *st, enum pp_profile_kind kind)
{
	struct pp_store_snapshot *s;

	pthread_mutex_lock(&st->lock);
	s = __snap_take(st, kind);
	/* Slots are reused: ids are not in slot order. */
	if (s)
		qsort(s->v, s->n, sizeof(*s->v), cmp_snap_id);
	pthread_mutex_unlock(&st->lock);
	return s;
}

/* Drop a reference; returns the chain to free once unreferenced. Lock held (or detached). */
static struct pp_store_snapshot *__snap_unref(struct pp_store *st, struct pp_store_snapshot *snap)
{
	struct pp_store_snapshot *dead = NULL;

	while (snap && --snap->refs == 0) {
		struct pp_store_snapshot *parent = snap->parent;
		if (st) {
			if (snap->prev)
				snap->prev->next = snap->next;
			else
				st->snaps = snap->next;
			if (snap->next)
				snap->next->prev = snap->prev;
			st->snap_bytes -= snap->bytes;
		}
		snap->prev = NULL;
		snap->next = dead;
		dead = snap;
		snap = parent;
	}
	return dead;
}

void pp_store_snapshot__free(struct pp_store_snapshot *snap)
{
	if (!snap)
		return;
	struct pp_store *st = snap->st;
	if (st)
		pthread_mutex_lock(&st->lock);
	struct pp_store_snapshot *dead = __snap_unref(st, snap);
	if (st)
		pthread_mutex_unlock(&st->lock);
	while (dead) {
		struct pp_store_snapshot *nx = dead->next;
		free(dead->v);
		free(dead);
		dead = nx;
	}
}

/* ---- rendering ---- */

static uint8_t stack_kind_for(enum pp_profile_kind k)
{
	return k == PP_PROFILE_ALLOCS ? PP_PROFILE_HEAP : (uint8_t)k;
}

static void stack_values(const struct pp_store *st, size_t i, const struct pp_store_snapshot *base,
			 int64_t out[NVALS])
{
	memcpy(out, st->stacks[i].v, sizeof(int64_t) * NVALS);
	if (!base || st->is_view)
		return;
	struct snap_val key = { .id = st->stacks[i].id };
	/* An overlay's values, else its base's. */
	for (; base; base = base->parent) {
		const struct snap_val *b =
			bsearch(&key, base->v, base->n, sizeof(*base->v), cmp_snap_id);
		if (!b)
			continue;
		for (int k = 0; k < NVALS; k++)
			out[k] -= b->v[k];
		break;
	}
}

static double heap_scale(uint64_t rate, int64_t count, int64_t bytes)
{
	if (rate <= 1 || count == 0)
		return 1.0;
	double avg = (double)bytes / (double)count;
	if (avg < 0)
		avg = -avg;
	if (avg <= 0)
		return 1.0;
	return 1.0 / (1.0 - exp(-avg / (double)rate));
}

/*
 * Where location l is in process pidx's address space: the index of its
 * mapping there (-1 none, KERNEL_MAPPING) and the address (*addr). A
 * location of an object has one per process mapping the object.
 */
static int32_t loc_where(const struct pp_store *st, uint32_t pidx, const struct st_loc *l,
			 uint64_t *addr)
{
	*addr = l->addr;
	if (!(l->flags & LOC_OBJ))
		return l->mapping;
	const struct st_proc *p = &st->procs[pidx];
	for (size_t i = 0; i < p->n_mappings; i++) {
		const struct st_mapping *x = &p->mappings[i];
		if (x->obj == l->obj && l->off >= x->offset &&
		    l->off - x->offset < x->limit - x->start) {
			*addr = x->start + (l->off - x->offset);
			return (int32_t)i;
		}
	}
	return -1;
}

struct render_ctx {
	struct pp_store *st;
	struct pp_pprof *pp;
	uint64_t *loc_ids; /* per store loc: pprof id, 0 = not yet */
	/* Locations of objects: pprof id per (process, location). */
	uint64_t *pair_keys, *pair_ids;
	size_t pair_cap; /* power of two */
	uint64_t **map_ids; /* per proc: per mapping pprof id */
	uint64_t kernel_map;
};

static uint64_t render_mapping(struct render_ctx *rc, uint32_t pidx, int32_t m)
{
	struct st_proc *p = &rc->st->procs[pidx];
	if (m == KERNEL_MAPPING) {
		if (!rc->kernel_map) {
			struct pp_pprof_mapping km = { .start = 0xffff800000000000ull,
						       .limit = 0xffffffffffffffffull,
						       .file = "[kernel.kallsyms]" };
			rc->kernel_map = pp_pprof__add_mapping(rc->pp, &km);
		}
		return rc->kernel_map;
	}
	if (m < 0 || (size_t)m >= p->n_mappings)
		return 0;
	if (!rc->map_ids[pidx]) {
		rc->map_ids[pidx] = calloc(p->n_mappings, sizeof(uint64_t));
		if (!rc->map_ids[pidx])
			return 0;
	}
	if (!rc->map_ids[pidx][m]) {
		const struct st_mapping *x = &p->mappings[m];
		struct pp_pprof_mapping pm = { .start = x->start,
					       .limit = x->limit,
					       .offset = x->offset,
					       .file = x->file,
					       .build_id = x->build_id[0] ? x->build_id : NULL };
		rc->map_ids[pidx][m] = pp_pprof__add_mapping(rc->pp, &pm);
	}
	return rc->map_ids[pidx][m];
}

static uint64_t render_loc(struct render_ctx *rc, uint32_t pidx, uint32_t li)
{
	const struct st_loc *l = &rc->st->locs[li];
	uint64_t *slot = &rc->loc_ids[li];
	if (l->flags & LOC_OBJ) {
		uint64_t key = ((uint64_t)pidx << 32 | li) + 1;
		size_t s = pp_hash_bytes(&key, sizeof(key), 5) & (rc->pair_cap - 1);
		while (rc->pair_keys[s] && rc->pair_keys[s] != key)
			s = (s + 1) & (rc->pair_cap - 1);
		rc->pair_keys[s] = key;
		slot = &rc->pair_ids[s];
	}
	if (*slot)
		return *slot;
	struct pp_pprof_line lines[64];
	size_t n = PP_MIN(l->n_frames, ARRAY_SIZE(lines));
	for (size_t i = 0; i < n; i++) {
		lines[i] = (struct pp_pprof_line){ .function = l->frames[i].function,
						   .system_name = l->frames[i].system_name,
						   .file = l->frames[i].file,
						   .line = l->frames[i].line,
						   .start_line = l->frames[i].start_line };
	}
	uint64_t addr;
	int32_t mapping = loc_where(rc->st, pidx, l, &addr);
	uint64_t mid = render_mapping(rc, (l->flags & LOC_OBJ) ? pidx : l->proc, mapping);
	/*
	 * No symbol covers the address: the frame's name is the invented
	 * "file+0xoffset". A location with lines is final for Parca, Pyroscope
	 * and go tool pprof, so send it address-only under its mapping (file,
	 * build id) and let them symbolize it; the text renderings keep the name.
	 */
	if (!l->has_function && mid && mapping >= 0)
		n = 0;
	/* has_inline_frames means "inline frames were looked up" (DWARF present). */
	struct pp_pprof_loc_info info = { .has_function = l->has_function,
					  .has_file = l->has_file,
					  .has_line = l->has_line,
					  .has_inline = l->has_line };
	*slot = pp_pprof__add_location_ex(rc->pp, mid, addr, lines, n, &info);
	return *slot;
}

static bool in_group(const struct pp_store *st, uint32_t pidx, int group)
{
	return group < 0 || st->procs[pidx].group == group;
}

static int render_proto(struct pp_store *st, const struct pp_store_render_opts *o,
			struct pp_buf *out)
{
	enum pp_profile_kind kind = o->kind;
	uint8_t sk = stack_kind_for(kind);
	struct render_ctx rc = { .st = st };
	int r = -ENOMEM;
	uint64_t now = pp_now_real_ns();

	rc.pp = pp_pprof__new();
	rc.loc_ids = calloc(st->n_locs + 1, sizeof(*rc.loc_ids));
	rc.map_ids = calloc(st->n_procs + 1, sizeof(*rc.map_ids));
	{
		size_t nf = 0;
		for (size_t i = 0; i < st->n_stacks; i++)
			nf += st->stacks[i].n;
		rc.pair_cap = 16;
		while (rc.pair_cap < 2 * nf + 2)
			rc.pair_cap *= 2;
		rc.pair_keys = calloc(rc.pair_cap, sizeof(*rc.pair_keys));
		rc.pair_ids = calloc(rc.pair_cap, sizeof(*rc.pair_ids));
	}
	if (!rc.pp || !rc.loc_ids || !rc.map_ids || !rc.pair_keys || !rc.pair_ids)
		goto out;

	int64_t duration = o->base ? (int64_t)(now - o->base->time_ns) : 0;
	switch (kind) {
	case PP_PROFILE_CPU:
		pp_pprof__add_sample_type(rc.pp, "samples", "count");
		pp_pprof__add_sample_type(rc.pp, "cpu", "nanoseconds");
		pp_pprof__set_period(rc.pp, "cpu", "nanoseconds", (int64_t)st->opts.cpu_period_ns);
		if (duration <= 0)
			duration = 1;
		break;
	case PP_PROFILE_HEAP:
	case PP_PROFILE_ALLOCS:
		pp_pprof__add_sample_type(rc.pp, "alloc_objects", "count");
		pp_pprof__add_sample_type(rc.pp, "alloc_space", "bytes");
		pp_pprof__add_sample_type(rc.pp, "inuse_objects", "count");
		pp_pprof__add_sample_type(rc.pp, "inuse_space", "bytes");
		pp_pprof__set_period(rc.pp, "space", "bytes", (int64_t)st->opts.heap_sample_rate);
		if (kind == PP_PROFILE_ALLOCS)
			pp_pprof__set_default_sample_type(rc.pp, "alloc_space");
		break;
	case PP_PROFILE_GOROUTINE:
		pp_pprof__add_sample_type(rc.pp, "goroutine", "count");
		pp_pprof__set_period(rc.pp, "goroutine", "count", 1);
		break;
	case PP_PROFILE_THREADCREATE:
		pp_pprof__add_sample_type(rc.pp, "threadcreate", "count");
		pp_pprof__set_period(rc.pp, "threadcreate", "count", 1);
		break;
	case PP_PROFILE_BLOCK:
	case PP_PROFILE_MUTEX:
		pp_pprof__add_sample_type(rc.pp, "contentions", "count");
		pp_pprof__add_sample_type(rc.pp, "delay", "nanoseconds");
		pp_pprof__set_period(rc.pp, "contentions", "count", 1);
		break;
	default:
		r = -EINVAL;
		goto out;
	}
	pp_pprof__set_time(rc.pp, (int64_t)now,
			   o->base ? duration : (kind == PP_PROFILE_CPU ? 1 : 0));
	for (size_t i = 0; i < o->n_comments; i++)
		if (o->comments[i])
			pp_pprof__add_comment(rc.pp, o->comments[i]);

	/*
	 * Mapping 1 is the main executable of the process with the most
	 * samples in this profile (the application, not a wrapper or an init
	 * shim), else of the first live process.
	 */
	{
		int64_t *weight = calloc(st->n_procs ? st->n_procs : 1, sizeof(*weight));
		size_t best = SIZE_MAX;
		for (size_t i = 0; weight && i < st->n_stacks; i++) {
			const struct st_stack *s = &st->stacks[i];
			if (s->kind != sk || s->proc >= st->n_procs)
				continue;
			int64_t v[NVALS];
			stack_values(st, i, o->base, v);
			weight[s->proc] += v[0] < 0 ? -v[0] : v[0];
		}
		for (size_t i = 0; i < st->n_procs; i++) {
			struct st_proc *p = &st->procs[i];
			if (!p->used || !in_group(st, (uint32_t)i, o->group) ||
			    p->exe_mapping < 0 || !(p->alive || i + 1 == st->n_procs))
				continue;
			if (best == SIZE_MAX || (weight && weight[i] > weight[best]))
				best = i;
		}
		free(weight);
		if (best != SIZE_MAX)
			render_mapping(&rc, (uint32_t)best, st->procs[best].exe_mapping);
	}

	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *s = &st->stacks[i];
		if (s->kind != sk || !in_group(st, s->proc, o->group))
			continue;
		int64_t v[NVALS];
		stack_values(st, i, o->base, v);
		int64_t vals[NVALS];
		size_t nv;
		switch (kind) {
		case PP_PROFILE_CPU:
		case PP_PROFILE_BLOCK:
		case PP_PROFILE_MUTEX:
			vals[0] = v[0];
			vals[1] = v[1];
			nv = 2;
			break;
		case PP_PROFILE_HEAP:
		case PP_PROFILE_ALLOCS: {
			double sa = heap_scale(st->opts.heap_sample_rate, v[0], v[1]);
			double si = heap_scale(st->opts.heap_sample_rate, v[2], v[3]);
			vals[0] = llround((double)v[0] * sa);
			vals[1] = llround((double)v[1] * sa);
			vals[2] = llround((double)v[2] * si);
			vals[3] = llround((double)v[3] * si);
			nv = 4;
			break;
		}
		default:
			vals[0] = v[0];
			nv = 1;
			break;
		}
		bool nonzero = false;
		for (size_t k = 0; k < nv; k++)
			nonzero |= vals[k] != 0;
		if (!nonzero)
			continue;

		uint64_t ids[MAX_FRAMES];
		size_t n = 0;
		for (uint32_t k = 0; k < s->n && n < MAX_FRAMES; k++) {
			uint64_t id = render_loc(&rc, s->proc, s->locs[k]);
			if (id)
				ids[n++] = id;
		}
		const struct st_proc *p = &st->procs[s->proc];
		struct pp_pprof_label labels[7];
		size_t nl = 0;
		labels[nl++] = (struct pp_pprof_label){ .key = "pid", .num = p->pid };
		labels[nl++] = (struct pp_pprof_label){ .key = "comm", .str = p->comm };
		if (p->container_id[0])
			labels[nl++] = (struct pp_pprof_label){ .key = "container_id",
								.str = p->container_id };
		if (p->container[0])
			labels[nl++] =
				(struct pp_pprof_label){ .key = "container", .str = p->container };
		if (s->tid > 0 && (size_t)s->tid <= p->n_names)
			labels[nl++] = (struct pp_pprof_label){ .key = "thread_name",
								.str = p->names[s->tid - 1] };
		if (kind == PP_PROFILE_HEAP || kind == PP_PROFILE_ALLOCS)
			labels[nl++] = (struct pp_pprof_label){ .key = "bytes",
								.num = (int64_t)s->size,
								.num_unit = "bytes" };
		r = pp_pprof__add_sample(rc.pp, ids, n, vals, nv, labels, nl);
		if (r < 0)
			goto out;
	}
	r = pp_pprof__encode(rc.pp, true, out);
out:
	if (rc.map_ids)
		for (size_t i = 0; i < st->n_procs; i++)
			free(rc.map_ids[i]);
	free(rc.map_ids);
	free(rc.loc_ids);
	free(rc.pair_keys);
	free(rc.pair_ids);
	pp_pprof__free(rc.pp);
	return r;
}

struct text_rec {
	size_t stack;
	int64_t v[NVALS];
};

static int cmp_rec_desc(const void *a, const void *b)
{
	const struct text_rec *x = a, *y = b;
	int64_t kx = x->v[3] ? x->v[3] : x->v[1], ky = y->v[3] ? y->v[3] : y->v[1];
	if (kx != ky)
		return kx < ky ? 1 : -1;
	return x->stack < y->stack ? -1 : (x->stack > y->stack);
}

static int cmp_rec_count(const void *a, const void *b)
{
	const struct text_rec *x = a, *y = b;
	if (x->v[0] != y->v[0])
		return x->v[0] < y->v[0] ? 1 : -1;
	return x->stack < y->stack ? -1 : (x->stack > y->stack);
}

static int text_frames(struct pp_store *st, struct pp_buf *out, const struct st_stack *s)
{
	int r = 0;
	uint64_t addr;
	for (uint32_t k = 0; k < s->n && !r; k++) {
		loc_where(st, s->proc, &st->locs[s->locs[k]], &addr);
		r = pp_buf_printf(out, " %#" PRIx64, addr);
	}
	r = r ? r : pp_buf_puts(out, "\n");
	for (uint32_t k = 0; k < s->n && !r; k++) {
		const struct st_loc *l = &st->locs[s->locs[k]];
		loc_where(st, s->proc, l, &addr);
		if (!l->n_frames) {
			r = pp_buf_printf(out, "#\t%#" PRIx64 "\n", addr);
			continue;
		}
		for (uint32_t f = 0; f < l->n_frames && !r; f++) {
			const struct st_frame *fr = &l->frames[f];

			/* names come from the target's files: one line each */
			r = pp_buf_printf(out, "#\t%#" PRIx64 "\t", addr);
			pp_buf_put_text(out, fr->function ? fr->function : "?", false);
			if (fr->file) {
				pp_buf_puts(out, "\t");
				pp_buf_put_text(out, fr->file, false);
				r = r ? r : pp_buf_printf(out, ":%u", fr->line);
			}
			r = r ? r : pp_buf_puts(out, "\n");
		}
	}
	return r ? r : pp_buf_puts(out, "\n");
}

static int render_text(struct pp_store *st, const struct pp_store_render_opts *o,
		       struct pp_buf *out)
{
	enum pp_profile_kind kind = o->kind;
	uint8_t sk = stack_kind_for(kind);
	struct text_rec *recs = calloc(st->n_stacks + 1, sizeof(*recs));
	size_t n = 0;
	int64_t tot[NVALS] = { 0 };
	int r = 0;

	if (!recs)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *s = &st->stacks[i];
		if (s->kind != sk || !in_group(st, s->proc, o->group))
			continue;
		stack_values(st, i, o->base, recs[n].v);
		if (!recs[n].v[0] && !recs[n].v[1] && !recs[n].v[2] && !recs[n].v[3])
			continue;
		recs[n].stack = i;
		for (int k = 0; k < NVALS; k++)
			tot[k] += recs[n].v[k];
		n++;
	}
	switch (kind) {
	case PP_PROFILE_HEAP:
	case PP_PROFILE_ALLOCS:
		qsort(recs, n, sizeof(*recs), cmp_rec_desc);
		r = pp_buf_printf(out,
				  "heap profile: %" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64
				  "] @ heap/%" PRIu64 "\n",
				  tot[2], tot[3], tot[0], tot[1], 2 * st->opts.heap_sample_rate);
		for (size_t i = 0; i < n && !r; i++) {
			r = pp_buf_printf(out,
					  "%" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @",
					  recs[i].v[2], recs[i].v[3], recs[i].v[0], recs[i].v[1]);
			r = r ? r : text_frames(st, out, &st->stacks[recs[i].stack]);
		}
		break;
	case PP_PROFILE_BLOCK:
	case PP_PROFILE_MUTEX:
		qsort(recs, n, sizeof(*recs), cmp_rec_desc);
		r = pp_buf_printf(out, "--- %s:\ncycles/second=1000000000\n",
				  kind == PP_PROFILE_BLOCK ? "contention" : "mutex");
		if (!r && kind == PP_PROFILE_MUTEX)
			r = pp_buf_puts(out, "sampling period=1\n");
		for (size_t i = 0; i < n && !r; i++) {
			r = pp_buf_printf(out, "%" PRId64 " %" PRId64 " @", recs[i].v[1],
					  recs[i].v[0]);
			r = r ? r : text_frames(st, out, &st->stacks[recs[i].stack]);
		}
		break;
	case PP_PROFILE_GOROUTINE:
	case PP_PROFILE_THREADCREATE:
	case PP_PROFILE_CPU:
		qsort(recs, n, sizeof(*recs), cmp_rec_count);
		r = pp_buf_printf(out, "%s profile: total %" PRId64 "\n",
				  pp_profile_kind__name(kind), tot[0]);
		for (size_t i = 0; i < n && !r; i++) {
			r = pp_buf_printf(out, "%" PRId64 " @", recs[i].v[0]);
			r = r ? r : text_frames(st, out, &st->stacks[recs[i].stack]);
		}
		break;
	default:
		r = -EINVAL;
	}
	for (size_t i = 0; i < o->n_comments && !r; i++)
		if (o->comments[i])
			r = pp_buf_printf(out, "# %s\n", o->comments[i]);
	free(recs);
	return r;
}

static void view_free(struct pp_store *v)
{
	for (size_t i = 0; v->procs && i < v->n_procs; i++) {
		free(v->procs[i].names);
		free(v->procs[i].mappings);
	}
	free(v->procs);
	free(v->locs);
	if (v->n_stacks)
		free(v->stacks[0].locs); /* one buffer for every stack's list */
	free(v->stacks);
}

/*
 * Lock held: a frozen copy of what a render of o reads. The stacks of the
 * kind and group with a non-zero value (relative to o->base), their
 * location lists renumbered into a compact copy of the locations they use,
 * and the processes (names and mappings copied, as they grow). Frame
 * strings and mapping file names are shared, not copied: they are written
 * once and freed only by gc(), which frees nothing while st->renders > 0.
 */
static int view_build(struct pp_store *st, const struct pp_store_render_opts *o, struct pp_store *v)
{
	uint8_t sk = stack_kind_for(o->kind);
	uint32_t *locmap = calloc(st->n_locs + 1, sizeof(*locmap));
	size_t n = 0, nf = 0, nl = 0;
	int r = -ENOMEM;

	memset(v, 0, sizeof(*v));
	v->opts = st->opts;
	v->is_view = true;
	v->n_procs = st->n_procs;
	if (!locmap)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *x = &st->stacks[i];
		if (x->kind != sk || !in_group(st, x->proc, o->group))
			continue;
		n++;
		nf += x->n;
	}
	v->stacks = calloc(n + 1, sizeof(*v->stacks));
	uint32_t *lbuf = malloc((nf + 1) * sizeof(*lbuf));
	v->procs = calloc(st->n_procs + 1, sizeof(*v->procs));
	if (!v->stacks || !lbuf || !v->procs) {
		free(lbuf);
		goto out;
	}
	for (size_t i = 0, off = 0; i < st->n_stacks; i++) {
		const struct st_stack *x = &st->stacks[i];
		if (x->kind != sk || !in_group(st, x->proc, o->group))
			continue;
		struct st_stack *y = &v->stacks[v->n_stacks];
		*y = *x;
		stack_values(st, i, o->base, y->v);
		if (!y->v[0] && !y->v[1] && !y->v[2] && !y->v[3])
			continue;
		y->locs = lbuf + off;
		for (uint32_t k = 0; k < x->n; k++) {
			uint32_t li = x->locs[k];
			if (!locmap[li])
				locmap[li] = (uint32_t)++nl;
			y->locs[k] = locmap[li] - 1;
		}
		off += x->n;
		v->n_stacks++;
	}
	if (!v->n_stacks)
		free(lbuf);
	v->locs = malloc((nl + 1) * sizeof(*v->locs));
	if (!v->locs)
		goto out;
	for (size_t i = 0; i < st->n_locs; i++)
		if (locmap[i])
			v->locs[locmap[i] - 1] = st->locs[i];
	v->n_locs = nl;
	for (size_t i = 0; i < st->n_procs; i++) {
		const struct st_proc *p = &st->procs[i];
		struct st_proc *q = &v->procs[i];
		if (!p->used)
			continue;
		*q = *p;
		q->maps = (struct pp_maps){ 0 };
		q->bids = NULL;
		q->objs = NULL;
		q->mix = NULL;
		q->threads = NULL;
		q->n_threads = 0;
		q->exe = NULL;
		q->cmdline = NULL;
		q->names = p->n_names ? malloc(p->n_names * sizeof(*p->names)) : NULL;
		q->mappings = p->n_mappings ? malloc(p->n_mappings * sizeof(*p->mappings)) : NULL;
		if ((p->n_names && !q->names) || (p->n_mappings && !q->mappings))
			goto out;
		if (p->n_names)
			memcpy(q->names, p->names, p->n_names * sizeof(*p->names));
		if (p->n_mappings)
			memcpy(q->mappings, p->mappings, p->n_mappings * sizeof(*p->mappings));
	}
	r = 0;
out:
	free(locmap);
	return r;
}

int pp_store__render(struct pp_store *st, const struct pp_store_render_opts *o, struct pp_buf *out)
{
	struct pp_store v;
	int r;
	/* Names for the locations seen so far, if the worker gets them in time. */
	wait_symbolized(st, RENDER_WAIT_NS);
	pthread_mutex_lock(&st->lock);
	r = view_build(st, o, &v);
	if (r == 0)
		st->renders++;
	pthread_mutex_unlock(&st->lock);
	if (r == 0) {
		/* Proto building, gzip and text formatting without the lock. */
		if (o->debug > 0 && o->kind != PP_PROFILE_CPU)
			r = render_text(&v, o, out);
		else
			r = render_proto(&v, o, out);
		pthread_mutex_lock(&st->lock);
		st->renders--;
		pthread_mutex_unlock(&st->lock);
	}
	view_free(&v);
	return r;
}

long pp_store__count(struct pp_store *st, enum pp_profile_kind kind, int group)
{
	long c = 0;
	uint8_t sk = stack_kind_for(kind);
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *s = &st->stacks[i];
		if (s->kind != sk || !in_group(st, s->proc, group))
			continue;
		if (kind == PP_PROFILE_HEAP ? s->v[2] != 0 : s->v[0] != 0)
			c++;
	}
	pthread_mutex_unlock(&st->lock);
	return c;
}

int pp_store__symbol(struct pp_store *st, int group, uint64_t addr, struct pp_buf *out)
{
	int r = -ENOENT;
	struct sym_job j = { .kind = JOB_NONE };
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n_procs && st->ops; i++) {
		struct st_proc *p = &st->procs[i];
		if (!p->alive || !in_group(st, (uint32_t)i, group))
			continue;
		const struct pp_map *m = pp_maps__find(&p->maps, addr);
		if (!m || !m->path || m->special)
			continue;
		/* Copied: resolved outside the lock. */
		const struct st_bid *bid = proc_build_id(p, m);
		j.m = *m;
		j.m.path = xstrdup(m->path);
		if (bid)
			j.bid = *bid;
		j.pid = p->pid;
		j.kind = j.m.path ? JOB_FILE : JOB_NONE;
		break;
	}
	pthread_mutex_unlock(&st->lock);
	if (j.kind == JOB_FILE &&
	    st->ops->resolve(st->ops_ctx, j.pid, &j.m, j.bid.len ? j.bid.id : NULL, j.bid.len, addr,
			     &j.res) == 0 &&
	    j.res.n && j.res.has_function)
		r = pp_buf_puts(out, j.res.frames[j.res.n - 1].function);
	job_free(&j);
	return r;
}

int pp_store__heap_stats(struct pp_store *st, pid_t pid, struct pp_store_heap_stats *ret)
{
	uint32_t pidx;
	struct pp_store_heap_stats hs = { 0 };
	pthread_mutex_lock(&st->lock);
	if (!proc_find(st, pid, &pidx)) {
		pthread_mutex_unlock(&st->lock);
		return -ESRCH;
	}
	for (size_t i = 0; i < st->n_stacks; i++) {
		const struct st_stack *s = &st->stacks[i];
		if (s->kind != PP_PROFILE_HEAP || s->proc != pidx)
			continue;
		double sa = heap_scale(st->opts.heap_sample_rate, s->v[0], s->v[1]);
		double si = heap_scale(st->opts.heap_sample_rate, s->v[2], s->v[3]);
		hs.alloc_objects += (uint64_t)llround((double)s->v[0] * sa);
		hs.alloc_bytes += (uint64_t)llround((double)s->v[1] * sa);
		if (s->v[2] > 0) {
			hs.inuse_objects += (uint64_t)llround((double)s->v[2] * si);
			hs.inuse_bytes += (uint64_t)llround((double)s->v[3] * si);
		}
	}
	pthread_mutex_unlock(&st->lock);
	*ret = hs;
	return 0;
}

void pp_store__stats(struct pp_store *st, struct pp_store_stats *ret)
{
	pthread_mutex_lock(&st->lock);
	*ret = st->stats;
	ret->stacks = st->n_stacks - st->n_free_stacks;
	ret->locations = st->n_locs - st->n_free_locs;
	ret->procs = 0;
	for (size_t i = 0; i < st->n_procs; i++)
		ret->procs += st->procs[i].alive;
	ret->procs_held = st->procs_held;
	ret->objects = st->objs_held;
	ret->file_opens = st->file_opens;
	ret->live_entries = st->n_live;
	ret->snapshot_bytes = st->snap_bytes;
	ret->snapshots = 0;
	ret->snapshots_full = 0;
	for (const struct pp_store_snapshot *sn = st->snaps; sn; sn = sn->next) {
		ret->snapshots++;
		ret->snapshots_full += !sn->parent;
	}
	pthread_mutex_unlock(&st->lock);
}
