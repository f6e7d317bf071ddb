/* endpoint.h — "host[:port]" endpoints as torchrun writes them (--rdzv-endpoint,
 * --master-addr/--master-port, etcd members). */
#pragma once

/* Split "host[:port]" or "[v6][:port]" into a malloc'd host and port; *ret_port
 * is default_port when none is given. The one endpoint parser of every backend.
 * An IPv6 address without brackets ("::1:29618": address, or address and
 * port?) is refused with the bracketed form as a hint. Returns 0, or -EINVAL
 * with *reterr (malloc'd) saying what is wrong, without the flag's name. */
int endpoint_parse(const char *endpoint, int default_port, char **ret_host, int *ret_port,
		   char **reterr);
