// SPDX-License-Identifier: Apache-2.0
/*
 * A FUSE file system that stops answering (test_fuse.py), written against
 * /dev/fuse directly (no libfuse): it mounts itself on MOUNTPOINT and
 * serves one regular file, "lib", whose bytes are those of SRC (read at
 * start). Attributes and entries are never cached (valid 0), so every stat
 * of the file asks the server. Once a LOOKUP of the name "freeze" arrives,
 * the server answers nothing ever again:
 *   noread   (default) it stops reading /dev/fuse: requests stay queued
 *            in the kernel, where a fatal signal can still end their wait;
 *   noanswer it keeps reading and drops every request: the kernel then
 *            waits for answers uninterruptibly (a hung sshfs looks so).
 * Prints "ready" when mounted. Ends (and the kernel aborts the
 * connection) when killed; the caller unmounts.
 *
 * usage: fusefreeze MOUNTPOINT SRC [noread|noanswer]
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_INO 2
#define BUF_SIZE (1 << 20)

static int fd;
static char *data;
static size_t data_len;

static void reply(uint64_t unique, int error, const void *body, size_t len)
{
	char buf[sizeof(struct fuse_out_header) + 4096];
	struct fuse_out_header *h = (void *)buf;

	if (len > sizeof(buf) - sizeof(*h))
		len = sizeof(buf) - sizeof(*h);
	h->len = (uint32_t)(sizeof(*h) + len);
	h->error = error;
	h->unique = unique;
	if (len)
		memcpy(buf + sizeof(*h), body, len);
	if (write(fd, buf, h->len) < 0 && errno != ENOENT)
		perror("fusefreeze: write");
}

static void fill_attr(struct fuse_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = 1;
	a->blksize = 4096;
	if (ino == FUSE_ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0755;
		a->size = data_len;
		a->blocks = (data_len + 511) / 512;
	}
}

static void reply_read(uint64_t unique, const struct fuse_read_in *in)
{
	size_t off = in->offset < data_len ? (size_t)in->offset : data_len;
	size_t n = data_len - off < in->size ? data_len - off : in->size;
	char *buf = malloc(sizeof(struct fuse_out_header) + n);
	struct fuse_out_header *h = (void *)buf;

	if (!buf) {
		reply(unique, -ENOMEM, NULL, 0);
		return;
	}
	h->len = (uint32_t)(sizeof(*h) + n);
	h->error = 0;
	h->unique = unique;
	memcpy(buf + sizeof(*h), data + off, n);
	if (write(fd, buf, h->len) < 0)
		perror("fusefreeze: write");
	free(buf);
}

/* One request; false once frozen. */
static bool serve(const char *req)
{
	const struct fuse_in_header *in = (const void *)req;
	const char *body = req + sizeof(*in);

	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *ii = (const void *)body;
		struct fuse_init_out o = { .major = FUSE_KERNEL_VERSION,
					   .minor = FUSE_KERNEL_MINOR_VERSION,
					   .max_readahead = ii->max_readahead,
					   .max_write = 65536,
					   .max_background = 16,
					   .congestion_threshold = 12 };
		reply(in->unique, 0, &o, sizeof(o));
		return true;
	}
	case FUSE_LOOKUP: {
		struct fuse_entry_out o = { 0 };

		if (!strcmp(body, "freeze")) {
			fprintf(stderr, "fusefreeze: frozen\n");
			return false;
		}
		if (in->nodeid != FUSE_ROOT_ID || strcmp(body, "lib")) {
			reply(in->unique, -ENOENT, NULL, 0);
			return true;
		}
		o.nodeid = FILE_INO;
		o.generation = 1;
		fill_attr(&o.attr, FILE_INO);
		reply(in->unique, 0, &o, sizeof(o));
		return true;
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out o = { 0 };

		fill_attr(&o.attr, in->nodeid);
		reply(in->unique, 0, &o, sizeof(o));
		return true;
	}
	case FUSE_OPEN:
	case FUSE_OPENDIR: {
		struct fuse_open_out o = { .fh = 1 };

		reply(in->unique, 0, &o, sizeof(o));
		return true;
	}
	case FUSE_READ:
		reply_read(in->unique, (const void *)body);
		return true;
	case FUSE_READDIR:
		reply(in->unique, 0, NULL, 0); /* empty: "lib" is found by name */
		return true;
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
		reply(in->unique, 0, NULL, 0);
		return true;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return true; /* no answer expected */
	default:
		reply(in->unique, -ENOSYS, NULL, 0);
		return true;
	}
}

static int load(const char *src)
{
	int sfd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (sfd < 0 || fstat(sfd, &st) < 0)
		return -1;
	data_len = (size_t)st.st_size;
	data = malloc(data_len ? data_len : 1);
	if (!data || pread(sfd, data, data_len, 0) != (ssize_t)data_len)
		return -1;
	close(sfd);
	return 0;
}

int main(int argc, char **argv)
{
	char opts[256];
	bool noanswer = argc > 3 && !strcmp(argv[3], "noanswer");
	char *req = malloc(BUF_SIZE);

	if (argc < 3 || !req) {
		fprintf(stderr, "usage: fusefreeze MOUNTPOINT SRC [noread|noanswer]\n");
		return 2;
	}
	if (load(argv[2]) < 0) {
		perror("fusefreeze: source");
		return 1;
	}
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("fusefreeze: /dev/fuse");
		return 77;
	}
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
	if (mount("fusefreeze", argv[1], "fuse", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("fusefreeze: mount");
		return 77;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = read(fd, req, BUF_SIZE);

		if (n < 0) {
			if (errno == EINTR || errno == ENOENT || errno == EAGAIN)
				continue;
			if (errno == ENODEV) /* unmounted */
				return 0;
			perror("fusefreeze: read");
			return 1;
		}
		if ((size_t)n < sizeof(struct fuse_in_header))
			continue;
		if (!serve(req))
			break;
	}
	/* Frozen. */
	while (noanswer) {
		if (read(fd, req, BUF_SIZE) < 0 && errno == ENODEV)
			return 0;
	}
	for (;;)
		pause();
}
