/* rdzv_rankkey.c — rank keys of nodes and the group rank order (see
 * rdzv_rankkey.h). Pure. */
#include "rdzv_rankkey.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

bool
rdzv_key_ok(const char *s, size_t len)
{
	if (len == 0 || len > RDZV_MAX_KEY_LEN) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '.' && c != '_' && c != ':' && c != '-') {
			return false;
		}
	}
	return true;
}

const char *
rdzv_node_key(const struct rdzv_node *n, size_t *ret_len)
{
	*ret_len = n->key_len;
	return n->key_len ? n->name + strlen(n->name) - n->key_len : NULL;
}

/* The length of the run of digits at s[0..len), and where its significant
 * digits start (past leading zeros) in *ret_sig. */
static size_t
digit_run(const char *s, size_t len, size_t *ret_sig)
{
	size_t n = 0;

	while (n < len && isdigit((unsigned char)s[n])) {
		n++;
	}
	*ret_sig = 0;
	while (*ret_sig + 1 < n && s[*ret_sig] == '0') {
		(*ret_sig)++;
	}
	return n;
}

int
rdzv_key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0, j = 0;

	while (i < alen && j < blen) {
		size_t na, nb, sa, sb;
		int r;

		if (!isdigit((unsigned char)a[i]) || !isdigit((unsigned char)b[j])) {
			if (a[i] != b[j]) {
				return (unsigned char)a[i] < (unsigned char)b[j] ? -1 : 1;
			}
			i++;
			j++;
			continue;
		}
		na = digit_run(a + i, alen - i, &sa);
		nb = digit_run(b + j, blen - j, &sb);
		if (na - sa != nb - sb) {
			return na - sa < nb - sb ? -1 : 1; /* more significant digits */
		}
		if ((r = memcmp(a + i + sa, b + j + sb, na - sa)) != 0) {
			return r < 0 ? -1 : 1;
		}
		if (na != nb) {
			return na < nb ? -1 : 1; /* equal values: fewer leading zeros first */
		}
		i += na;
		j += nb;
	}
	return (alen - i > 0) - (blen - j > 0);
}

int
rdzv_node_rank_cmp(const struct rdzv_node *a, const struct rdzv_node *b)
{
	size_t alen, blen;
	const char *ka = rdzv_node_key(a, &alen), *kb = rdzv_node_key(b, &blen);
	int r;

	if (ka && kb && (r = rdzv_key_cmp(ka, alen, kb, blen)) != 0) {
		return r;
	}
	if (!ka != !kb) {
		return ka ? -1 : 1;
	}
	return rdzv_node_cmp(a, b);
}

size_t
rdzv_node_prefix(const struct rdzv_node *n, const char **ret_prefix)
{
	size_t klen;
	const char *k = rdzv_node_key(n, &klen);

	*ret_prefix = k;
	while (k && klen > 0) {
		klen--;
		if (k[klen] == '-' || k[klen] == ':') {
			return klen;
		}
	}
	return 0;
}

bool
rdzv_same_prefix(const struct rdzv_node *a, const struct rdzv_node *b)
{
	const char *pa, *pb;
	size_t la = rdzv_node_prefix(a, &pa), lb = rdzv_node_prefix(b, &pb);

	return la == lb && (la == 0 || memcmp(pa, pb, la) == 0);
}

static int
cmp_domain(const void *x, const void *y, void *arg)
{
	const struct rdzv_node *const *nodes = arg;
	const struct rdzv_node *a = nodes[*(const size_t *)x], *b = nodes[*(const size_t *)y];
	const char *pa, *pb;
	size_t la = rdzv_node_prefix(a, &pa), lb = rdzv_node_prefix(b, &pb);
	int r = rdzv_key_cmp(pa ? pa : "", la, pb ? pb : "", lb);

	return r ? r : rdzv_node_rank_cmp(a, b);
}

size_t
rdzv_segments(const struct rdzv_node *const *nodes, size_t n, int segment, size_t max, bool *keep)
{
	size_t *by = xcalloc(n + 1, sizeof(*by));
	size_t taken = 0, seg = segment > 0 ? (size_t)segment : 1;

	for (size_t i = 0; i < n; i++) {
		by[i] = i;
	}
	qsort_r(by, n, sizeof(*by), cmp_domain, (void *)nodes);
	for (size_t i = 0; i < n;) {
		size_t j = i, whole;

		while (j < n && rdzv_same_prefix(nodes[by[i]], nodes[by[j]])) {
			j++;
		}
		whole = (j - i) / seg * seg;
		while (taken + whole > max) {
			whole -= seg;
		}
		for (size_t k = i; k < i + whole && keep; k++) {
			keep[by[k]] = true;
		}
		taken += whole;
		i = j;
	}
	free(by);
	return taken;
}
