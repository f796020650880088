/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which container a process runs in, from what the kernel shows any
 * process with ptrace read access (no container runtime socket, no API
 * server):
 *
 * - The container id is the 64-hex-digit component of the cgroup path in
 *   /proc/PID/cgroup. Runtimes and cgroup drivers spell it differently:
 *     containerd, systemd driver  .../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope
 *     CRI-O, systemd driver       .../crio-<id>.scope   (crio-conmon-<id>.scope is the monitor)
 *     Docker, systemd driver      .../docker-<id>.scope
 *     podman                      .../libpod-<id>.scope
 *     cgroupfs driver (any)       /kubepods/burstable/pod<uid>/<id>, /docker/<id>, .../crio-<id>
 *   The last matching component of the path wins (nested containers), the
 *   unified (v2, "0::") line first, then the v1 lines in order.
 * - The container name is the directory the kubelet keeps the container's
 *   termination log in, bind-mounted to /dev/termination-log in every
 *   container: in /proc/PID/mountinfo the mount's root is
 *   ".../pods/<pod uid>/containers/<name>/<random>".
 */
#include <errno.h>
#include <string.h>

#include "procfs.h"

#define ID_LEN 64

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_hex(s[i]))
			return false;
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
	size_t pl = strlen(p);
	return n >= pl && memcmp(s, p, pl) == 0;
}

/* One path component: copy the id into out (65 bytes) if it names a container. */
static bool component_id(const char *s, size_t n, char *out)
{
	static const char *const prefixes[] = { "cri-containerd-", "crio-", "docker-", "libpod-" };

	if (n > 6 && memcmp(s + n - 6, ".scope", 6) == 0)
		n -= 6;
	if (has_prefix(s, n, "crio-conmon-"))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
		size_t pl = strlen(prefixes[i]);
		if (has_prefix(s, n, prefixes[i])) {
			s += pl;
			n -= pl;
			break;
		}
	}
	if (n != ID_LEN || !all_hex(s, n))
		return false;
	memcpy(out, s, ID_LEN);
	out[ID_LEN] = '\0';
	return true;
}

/* Last container id among the components of path [p, p+n). */
static bool path_id(const char *p, size_t n, char *out)
{
	bool found = false;
	size_t i = 0;

	while (i < n) {
		size_t j = i;
		while (j < n && p[j] != '/')
			j++;
		if (j > i && component_id(p + i, j - i, out))
			found = true;
		i = j + 1;
	}
	return found;
}

int pp_proc__parse_cgroup_id(const char *buf, size_t len, char *ret, size_t n)
{
	char unified[ID_LEN + 1], v1[ID_LEN + 1], tmp[ID_LEN + 1];
	bool have_unified = false, have_v1 = false;
	size_t i = 0;

	if (!buf || !ret || n < ID_LEN + 1)
		return -EINVAL;
	while (i < len) {
		const char *line = buf + i, *end = memchr(line, '\n', len - i);
		size_t ll = end ? (size_t)(end - line) : len - i;
		const char *c1 = memchr(line, ':', ll), *c2;

		i += ll + 1;
		if (!c1)
			continue;
		c2 = memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line));
		if (!c2)
			continue;
		const char *path = c2 + 1;
		size_t pl = ll - (size_t)(path - line);
		if (!path_id(path, pl, tmp))
			continue;
		if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
			if (!have_unified)
				memcpy(unified, tmp, sizeof(tmp));
			have_unified = true;
		} else if (!have_v1) {
			memcpy(v1, tmp, sizeof(tmp));
			have_v1 = true;
		}
	}
	if (!have_unified && !have_v1)
		return -ENOENT;
	memcpy(ret, have_unified ? unified : v1, ID_LEN + 1);
	return 0;
}

/* Kubernetes container names are DNS labels: [a-z0-9-], at most 63. */
static bool dns_label(const char *s, size_t n)
{
	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

/* Field k (0-based, space-separated) of a mountinfo line. */
static bool field(const char *line, size_t ll, unsigned k, const char **ret, size_t *ret_n)
{
	size_t i = 0;

	for (unsigned f = 0;; f++) {
		while (i < ll && line[i] == ' ')
			i++;
		if (i >= ll)
			return false;
		size_t j = i;
		while (j < ll && line[j] != ' ')
			j++;
		if (f == k) {
			*ret = line + i;
			*ret_n = j - i;
			return true;
		}
		i = j;
	}
}

/* "<anything>/pods/<uid>/containers/<name>/<file>" -> name. */
static bool root_name(const char *r, size_t n, const char **ret, size_t *ret_n)
{
	size_t e[4], k = 0, i = n;

	/* The last four '/' separate pods? <uid> containers <name> <file>. */
	while (i > 0 && k < 4) {
		i--;
		if (r[i] == '/')
			e[k++] = i;
	}
	if (k < 4)
		return false;
	/* e[0]: before <file>, e[1]: before <name>, e[2]: before "containers", e[3]: before <uid> */
	if (e[1] - e[2] - 1 != 10 || memcmp(r + e[2] + 1, "containers", 10) != 0)
		return false;
	if (e[3] < 5 || memcmp(r + e[3] - 5, "/pods", 5) != 0)
		return false;
	if (e[0] == n - 1)
		return false;
	*ret = r + e[1] + 1;
	*ret_n = e[0] - e[1] - 1;
	return dns_label(*ret, *ret_n);
}

int pp_proc__parse_container_name(const char *buf, size_t len, char *ret, size_t n)
{
	static const char mp[] = "/dev/termination-log";
	size_t i = 0;

	if (!buf || !ret || n == 0)
		return -EINVAL;
	while (i < len) {
		const char *line = buf + i, *end = memchr(line, '\n', len - i);
		size_t ll = end ? (size_t)(end - line) : len - i;
		const char *root, *point, *name;
		size_t rn, pn, nn;

		i += ll + 1;
		if (!field(line, ll, 3, &root, &rn) || !field(line, ll, 4, &point, &pn))
			continue;
		if (pn != sizeof(mp) - 1 || memcmp(point, mp, pn) != 0)
			continue;
		if (!root_name(root, rn, &name, &nn))
			continue;
		if (nn >= n)
			return -ENAMETOOLONG;
		memcpy(ret, name, nn);
		ret[nn] = '\0';
		return 0;
	}
	return -ENOENT;
}
