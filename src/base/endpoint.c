#include "endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The bracketed form of an unbracketed IPv6 endpoint, for the error message:
 * "[::1]:29618" for "::1:29618" (the last group is a port when the rest is an
 * address), "[fe80::1]:PORT" for "fe80::1". */
static char *
ipv6_hint(const char *endpoint)
{
	const char *colon = strrchr(endpoint, ':');
	struct in6_addr a;
	long long port;
	char *host = xstrndup(endpoint, (size_t)(colon - endpoint)), *hint;

	if (parse_int(colon + 1, 0, 65535, &port) == 0 && inet_pton(AF_INET6, host, &a) == 1) {
		hint = xasprintf("[%s]:%s", host, colon + 1);
	} else if (inet_pton(AF_INET6, endpoint, &a) == 1) {
		hint = xasprintf("[%s]:PORT", endpoint);
	} else {
		hint = xstrdup("[IPV6]:PORT");
	}
	free(host);
	return hint;
}

int
endpoint_parse(const char *endpoint, int default_port, char **ret_host, int *ret_port,
	       char **reterr)
{
	const char *colon;
	long long port = default_port;
	char *host;

	if (!endpoint || !*endpoint) {
		goto invalid;
	}
	if (endpoint[0] == '[') {
		const char *close = strchr(endpoint, ']');

		if (!close || close == endpoint + 1) {
			goto invalid;
		}
		host = xstrndup(endpoint + 1, (size_t)(close - endpoint - 1));
		colon = close[1] == ':' ? close + 1 : NULL;
		if (!colon && close[1] != '\0') {
			free(host);
			goto invalid;
		}
	} else {
		colon = strrchr(endpoint, ':');
		if (colon && strchr(endpoint, ':') != colon) {
			/* An IPv6 address without brackets: "::1:29618" could be an
			 * address alone or one with a port. Ask for brackets. */
			char *hint = ipv6_hint(endpoint);

			*reterr = xasprintf("an IPv6 address needs brackets: write %s", hint);
			free(hint);
			return -EINVAL;
		}
		host = colon ? xstrndup(endpoint, (size_t)(colon - endpoint)) : xstrdup(endpoint);
	}
	if ((colon && parse_int(colon + 1, 0, 65535, &port) < 0) || !*host || port < 0) {
		free(host);
		goto invalid;
	}
	*ret_host = host;
	*ret_port = (int)port;
	return 0;
invalid:
	*reterr = xstrdup(default_port < 0 ? "expected HOST:PORT or [IPV6]:PORT"
					   : "expected HOST[:PORT] or [IPV6][:PORT]");
	return -EINVAL;
}
