/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading /proc: process lists, process identity, memory maps, the files
 * behind mappings (resolved safely across mount namespaces), ELF build ids
 * and /proc/PID/status memory figures. Parsers take buffers so they can be
 * unit-tested and fuzzed; the *_read wrappers add the file access.
 *
 * All functions return 0 or -errno unless stated. Thread-safe (the only
 * global is the selector's regex cache, which has a lock).
 */
#ifndef PODPROF_PROCFS_H
#define PODPROF_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

#define PP_PROT_R 1u
#define PP_PROT_W 2u
#define PP_PROT_X 4u

struct pp_map {
	uint64_t start, end; /* [start, end) */
	uint64_t offset; /* file offset of start */
	uint32_t prot; /* PP_PROT_* */
	bool shared;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path; /* NULL for anonymous; " (deleted)" stripped */
	bool deleted;
	bool special; /* [heap], [stack], [vdso], [vsyscall], [anon:..] ... (path holds it) */
};

struct pp_maps {
	struct pp_map *v; /* sorted by start, no overlaps; paths live in the same allocation */
	size_t n;
};

#define PP_MAPS_MAX 1000000u /* more mappings: -E2BIG */

/*
 * Parse /proc/PID/maps text (need not be NUL-terminated). Malformed lines
 * (and lines longer than 4*PATH_MAX+128) are skipped and counted in
 * *ret_bad if non-NULL; so are entries overlapping an earlier one (maps
 * read while the process remaps). Paths are kept as the kernel prints them
 * (a '\n' in a name stays "\012"). special is set for every name that is
 * not an absolute path: [heap], [stack], [vdso], [vvar], [vsyscall],
 * [anon:x], anon_inode:..., so "path && !special" means a real file.
 * -E2BIG past PP_MAPS_MAX entries. Free with pp_maps__free.
 */
int pp_maps__parse(const char *buf, size_t len, struct pp_maps *ret, size_t *ret_bad);
int pp_maps__read(pid_t pid, struct pp_maps *ret);

/* /proc/PID/maps is read a buffer at a time (the text is never held
 * whole), and only so much of it: a target can map hundreds of thousands
 * of areas. What lies past either cap is left out (the lowest addresses
 * are kept); a cut read succeeds with truncated set. */
#define PP_MAPS_KEEP 65536u /* entries kept, by default */
#define PP_MAPS_READ_BYTES ((size_t)16 << 20) /* bytes read, by default */
/* Sets the caps process-wide (config limits.max_maps_entries and
 * limits.max_maps_bytes, at start); 0 leaves a cap as it is. Entries are
 * capped at PP_MAPS_MAX. */
void pp_maps__set_caps(size_t entries, size_t bytes);
void pp_maps__caps(size_t *entries, size_t *bytes);

struct pp_maps_read_info {
	size_t bytes; /* bytes read */
	size_t kept; /* lines read (entries kept, malformed lines included) */
	bool truncated; /* a cap was hit: entries were left out */
	uint64_t hash; /* of the lines parsed: equal text, equal hash */
};
/* ret NULL: only info (the hash), nothing parsed or kept. */
int pp_maps__read_ex(pid_t pid, struct pp_maps *ret, struct pp_maps_read_info *info);
/* Reads cut by the caps above, since start (process-wide). */
uint64_t pp_maps__truncated_total(void);
/* Mapping containing addr (binary search), or NULL. Borrowed from maps. */
const struct pp_map *pp_maps__find(const struct pp_maps *maps, uint64_t addr);
/* Frees v and the paths; accepts a zeroed struct. */
void pp_maps__free(struct pp_maps *maps);

/*
 * Open the file behind mapping m of process pid, read-only, O_CLOEXEC:
 * /proc/PID/map_files/<start>-<end> first (the kernel's exact inode), else
 * /proc/PID/root/<path> after checking st_dev/st_ino against the mapping.
 * -ESTALE when the path resolves to another file, -ENOENT for anonymous.
 * Never opens the maps path in podprof's own mount namespace.
 */
int pp_proc__open_mapped(pid_t pid, const struct pp_map *m);

/*
 * Files one target makes podprof open in one pass outside the unwinder (the
 * store's build-id reads, the heap tracer's allocator search): a target
 * mapping thousands of distinct files must not cost thousands of opens a
 * pass. Files past the budget are skipped (no build id; not searched for
 * malloc). The budget is process-wide, PP_OPEN_BUDGET by default, set at
 * start from config limits.max_target_fds (0 leaves it as it is).
 */
#define PP_OPEN_BUDGET 256u
void pp_proc__set_open_budget(unsigned opens);
struct pp_open_budget {
	unsigned left;
	bool spent; /* a file was skipped */
};
/* A pass's budget, full. */
void pp_open_budget__init(struct pp_open_budget *b);
/* Takes one open: false (and the first time in this pass, one count in
 * pp_open_budget__hits) when the budget is spent. */
bool pp_open_budget__take(struct pp_open_budget *b);
/* Passes cut by their budget, since start (process-wide). */
uint64_t pp_open_budget__hits(void);

/*
 * Same resolution but returns a path that the kernel can follow for this
 * inode ("/proc/PID/map_files/..." or "/proc/PID/root/..."), for uprobe
 * attachment. Writes into buf (size n).
 */
int pp_proc__mapped_path(pid_t pid, const struct pp_map *m, char *buf, size_t n);

/*
 * Details of the resolution above:
 * - map_files needs CAP_CHECKPOINT_RESTORE (or SYS_ADMIN) in the initial
 *   user namespace; without it (EPERM) or when it is gone (ENOENT) the
 *   root path is tried. Files deleted since they were mapped are only
 *   reachable through map_files.
 * - Both routes verify the opened file: inode == m->inode and
 *   major/minor(st_dev) == m->dev_major/dev_minor.
 * - The root route opens through pp_proc__open_in_root (never a plain
 *   open or stat of "/proc/PID/root/..."). pp_proc__mapped_path returns a
 *   root path only when it holds no symlink, "." or ".." (else -ENOENT),
 *   so the kernel's plain resolution of it reaches the inode checked; a
 *   target that swaps a directory for a symlink between the check and the
 *   kernel's lookup can still redirect a uprobe attach (not a read).
 * - On overlayfs (the usual container root) maps shows the backing file's
 *   dev/inode while stat on the path shows the overlay's. When the plain
 *   check fails, the opened file is mmapped once in podprof and the
 *   kernel's own view of that mapping (PROCMAP_QUERY, else /proc/self/maps)
 *   is compared instead: that is the inode the target maps, and the inode
 *   a uprobe on this path attaches to.
 * The _ex variants take PP_RESOLVE_* flags (tests, and callers that want
 * one route only).
 */
#define PP_RESOLVE_NO_MAP_FILES 1u /* skip /proc/PID/map_files */
#define PP_RESOLVE_NO_ROOT 2u /* skip the /proc/PID/root fallback */
int pp_proc__open_mapped_ex(pid_t pid, const struct pp_map *m, unsigned flags);
int pp_proc__mapped_path_ex(pid_t pid, const struct pp_map *m, unsigned flags, char *buf, size_t n);

/* Path of a file inside the target's root: "/proc/PID/root" + path. For
 * display and for the kernel (uprobes); podprof itself opens target paths
 * only through pp_proc__open_in_root. */
int pp_proc__root_path(pid_t pid, const char *path, char *buf, size_t n);

/*
 * Opens path (absolute, as the target sees it) inside pid's root:
 * openat2 on /proc/PID/root with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
 * | resolve, so "..", absolute symlinks and /proc/N/root links cannot
 * leave the target's root (bind mounts inside it are followed:
 * RESOLVE_NO_XDEV would refuse them). flags: open(2) flags, O_CLOEXEC and
 * O_NOCTTY added. fd or -errno; -ENOSYS before Linux 5.6 (no plain-open
 * fallback). pp_proc__openat_in_root does the same inside the directory
 * rootfd (e.g. podprof's /usr/lib/debug).
 */
int pp_proc__open_in_root(pid_t pid, const char *path, int flags, uint64_t resolve);
int pp_proc__openat_in_root(int rootfd, const char *path, int flags, uint64_t resolve);

/*
 * The stat of m's file, resolved and checked as pp_proc__mapped_path does
 * (without handing a path to anyone: symlinks inside the target's root are
 * followed, in that root). For caches keyed by device and inode. 0 or
 * -errno.
 */
struct stat;
int pp_proc__mapped_stat(pid_t pid, const struct pp_map *m, struct stat *ret);

/*
 * Files that never answer. A target's file system can make open, stat and
 * read wait for ever (a FUSE server that stops answering; O_NONBLOCK does
 * nothing there). pp_proc__open_mapped(_ex), pp_proc__mapped_path(_ex),
 * pp_proc__mapped_stat, pp_proc__open_in_root and pp_proc__mapped_buildid
 * therefore run on opener threads (bounded.c) and return -ETIMEDOUT when
 * the file system has not answered within the deadline (PP_FILE_DEADLINE_MS
 * by default). The thread left waiting is abandoned (it closes what it
 * opened if the answer ever comes); while it waits, the mapping's device
 * counts as hung and every access to a mapping on it returns -ETIMEDOUT at
 * once, without waiting. At most PP_OPENER_THREADS_MAX opener threads live
 * (stuck ones included); when all are stuck, accesses fail at once. Idle
 * threads end after 30 s. A thread stuck in a FUSE request that the server
 * has already read cannot be killed (the kernel waits for the answer
 * uninterruptibly); it holds the process's exit until the server answers
 * or its connection ends. Reads through an fd returned here are not
 * bounded: callers that read a target's file on a thread that must not
 * stop use pp_proc__mapped_buildid or do the read on such a thread.
 */
#define PP_FILE_DEADLINE_MS 2000u
#define PP_OPENER_THREADS_MAX 16u
/* 0 leaves it as it is. Process-wide. */
void pp_proc__set_file_deadline(unsigned ms);
struct pp_file_stats {
	uint64_t hangs; /* accesses abandoned at their deadline */
	uint64_t skipped; /* accesses refused at once: device hung, or every thread stuck */
	unsigned stuck_threads; /* opener threads still waiting on a file system */
};
void pp_proc__file_stats(struct pp_file_stats *ret);
/*
 * Opens m's file (as pp_proc__open_mapped) and reads its build id
 * (pp_buildid__from_fd), all on an opener thread under the deadline.
 * ret must hold PP_BUILD_ID_MAX bytes. ret_st (if not NULL) is the opened
 * file's fstat whenever it was opened (even without a build id), zeroed
 * otherwise. 0 or -errno (-ETIMEDOUT as above).
 */
int pp_proc__mapped_buildid(pid_t pid, const struct pp_map *m, uint8_t *ret, size_t *ret_len,
			    struct stat *ret_st);
/*
 * Runs fn on an opener thread under the same deadline, on a copy of the
 * size bytes at arg (at most PP_CALL_ARG_MAX; fn must not keep pointers
 * to the caller's memory: on timeout the caller has moved on). For other
 * reads of a target's files (an executable's ELF headers). fn's return
 * (which must not be an fd: an abandoned result is dropped), or
 * -ETIMEDOUT.
 */
#define PP_CALL_ARG_MAX 256u
int pp_proc__call_bounded(int (*fn)(void *arg), const void *arg, size_t size);

/*
 * GNU build id from the NT_GNU_BUILD_ID note ("GNU\0", type 3, 1..64
 * bytes), ELF32/ELF64, either byte order. PT_NOTE segments are searched
 * first, then SHT_NOTE sections. ret must hold PP_BUILD_ID_MAX bytes.
 * -ENOENT if none, -ENOEXEC if not ELF, -EBADMSG if malformed or truncated
 * (header tables outside the image, notes out of range and no id found).
 * from_fd reads only the headers and note blocks with pread (first 4 KiB,
 * then what the headers point at, capped), never the whole file.
 */
#define PP_BUILD_ID_MAX 64
int pp_buildid__from_buf(const void *elf, size_t len, uint8_t *ret, size_t *ret_len);
int pp_buildid__from_fd(int fd, uint8_t *ret, size_t *ret_len);
/* Lowercase hex, NUL-terminated; out must hold 2*len+1. */
void pp_buildid__hex(const uint8_t *id, size_t len, char *out);

struct pp_proc_info {
	pid_t pid, ppid;
	char comm[16];
	char state; /* R, S, D, ... */
	uint64_t start_time; /* field 22 of stat, clock ticks: (pid, start_time) names a process */
	char *exe; /* readlink of /proc/PID/exe as the target sees it (may be NULL) */
	char *cmdline; /* argv joined by NUL (no trailing NUL); may be NULL for kernel threads */
	size_t cmdline_len;
	bool kernel_thread;
	char container_id[65]; /* "" when not in a container (see pp_proc__parse_cgroup_id) */
	char container[64]; /* Kubernetes container name, "" when unknown */
};

#define PP_CMDLINE_MAX 65536 /* cmdline bytes read; longer ones are cut */

/*
 * Parse "/proc/PID/stat" text: comm is what lies between the first '(' and
 * the LAST ')' (it may contain spaces and parentheses). Sets pid, ppid,
 * comm, state, start_time, kernel_thread (PF_KTHREAD in flags); exe and
 * cmdline are NULL.
 */
int pp_proc__parse_stat(const char *buf, size_t len, struct pp_proc_info *ret);
/*
 * Container identity (container.c). From /proc/PID/cgroup text: the
 * 64-hex-digit id of the innermost container in the containerd, CRI-O,
 * Docker and podman formats (systemd and cgroupfs drivers), the unified
 * hierarchy first. ret must hold 65 bytes. -ENOENT when none.
 */
int pp_proc__parse_cgroup_id(const char *buf, size_t len, char *ret, size_t n);
/*
 * From /proc/PID/mountinfo text: the Kubernetes container name, the
 * directory of the kubelet's termination-log file bind-mounted on
 * /dev/termination-log (".../pods/<uid>/containers/<name>/<file>").
 * -ENOENT when absent (not a pod, or a custom terminationMessagePath),
 * -ENAMETOOLONG when it does not fit in n.
 */
int pp_proc__parse_container_name(const char *buf, size_t len, char *ret, size_t n);

/*
 * stat + container_id and container (empty when unknown) + exe (NULL when unreadable) + cmdline (NULL when empty; cut at
 * PP_CMDLINE_MAX; trailing NULs removed). Free with pp_proc_info__free.
 */
int pp_proc__read_info(pid_t pid, struct pp_proc_info *ret);
/*
 * The cheap part of pp_proc__read_info: stat and exe only (two reads of
 * /proc, no allocation but exe's). cmdline is NULL and the container
 * fields are empty; pp_proc__read_extra fills them in later.
 */
int pp_proc__read_ident(pid_t pid, struct pp_proc_info *ret);
/* cmdline and container of info (read by pp_proc__read_ident); fields it
 * cannot read stay empty. */
void pp_proc__read_extra(pid_t pid, struct pp_proc_info *info);
void pp_proc_info__free(struct pp_proc_info *info);

struct pp_proc_status {
	uint64_t vm_rss_kb, vm_size_kb, vm_hwm_kb, vm_data_kb, vm_stk_kb, vm_lck_kb, vm_swap_kb;
	unsigned threads;
	uint64_t sig_blk, cap_eff;
	uid_t uid;
};
/* Fields missing from the text stay 0 (kernel threads have no Vm* lines). -EINVAL if none found. */
int pp_proc__parse_status(const char *buf, size_t len, struct pp_proc_status *ret);
int pp_proc__read_status(pid_t pid, struct pp_proc_status *ret);

/*
 * What discovery decided about each process it has seen (pidcache.c), so
 * that a pass reads only stat and exe (pp_proc__read_ident) of a process
 * seen in the previous pass, and the rest (cmdline, cgroup, mountinfo)
 * only when the process is new, changed its start time (pid reused), its
 * comm or its exe (exec, PR_SET_NAME), or is due for its periodic full
 * look (every refresh_passes passes, spread over the passes). At most max
 * entries (processes past it are read in full each pass). One thread.
 */
struct pp_pid_cache;
struct pp_pid_cache *pp_pid_cache__new(size_t max, unsigned refresh_passes);
void pp_pid_cache__free(struct pp_pid_cache *c);
/* true and *ret_verdict (as stored) when ident is the same process as in
 * the previous pass and not due for a full look. Marks the pid present. */
bool pp_pid_cache__lookup(struct pp_pid_cache *c, const struct pp_proc_info *ident,
			  int *ret_verdict);
/* Remembers the verdict on ident after a full look. -ENOSPC when full. */
int pp_pid_cache__store(struct pp_pid_cache *c, const struct pp_proc_info *ident, int verdict);
/* Ends a pass: forgets the pids neither looked up nor stored in it. */
void pp_pid_cache__end_pass(struct pp_pid_cache *c);
size_t pp_pid_cache__size(const struct pp_pid_cache *c);

/* Numeric entries of /proc (processes) and /proc/PID/task (threads). Caller frees *ret. */
int pp_proc__list_pids(pid_t **ret, size_t *ret_n);
int pp_proc__list_tids(pid_t pid, pid_t **ret, size_t *ret_n);
/* /proc/PID/task/TID/comm without the newline. */
int pp_proc__thread_name(pid_t pid, pid_t tid, char *buf, size_t n);

/*
 * 1 if info matches selector s, 0 if not, -errno on a bad pattern.
 * Every set field must match; kernel threads never match. comm: fnmatch,
 * flags 0. exe: fnmatch flags 0 (no FNM_PATHNAME: '*' crosses '/'); a
 * pattern without '/' is also tried on the basename; NULL exe never
 * matches. cmdline: POSIX ERE searched in argv joined by spaces. The regex
 * is compiled once and cached (locked, thread-safe).
 */
int pp_selector__match(const struct pp_selector *s, const struct pp_proc_info *info);

#endif
