/* etcd_pb.h — etcd v3's gRPC messages (etcdserverpb and mvccpb, the subset
 * elasticd uses, declared in etcd_rpc.proto with etcd's field numbers) packed
 * and unpacked with protobuf-c, and gRPC's length-prefixed message framing
 * (grpc/doc/PROTOCOL-HTTP2.md). Pure: no I/O; unit-tested and fuzzed.
 *
 * Answers decode into the struct etcd_response that etcd_response_decode
 * gives for the JSON gateway, so the layers above never see the wire. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_client.h"

/* The 5-byte prefix of a gRPC message: a compressed flag, then the length
 * (big-endian uint32). */
#define ETCD_PB_FRAME 5

/* The gRPC method of call: "/etcdserverpb.KV/Range", ...,
 * "/etcdserverpb.Watch/Watch". Static string. */
const char *etcd_pb_method(enum etcd_call call);

/* req's request message (RangeRequest, PutRequest, DeleteRangeRequest,
 * TxnRequest, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest)
 * framed for gRPC (uncompressed). A range_end of "" stands for the single
 * byte "\0" (every key from key on), as in the JSON encoding. Returns a
 * malloc'd buffer of *ret_len bytes; NULL (with *ret_len 0) only for
 * ETCD_CALL_WATCH. */
uint8_t *etcd_pb_encode_request(const struct etcd_request *req, size_t *ret_len);

/* A framed WatchRequest carrying a create_request for spec (key, range_end
 * as above, start_revision when > 0, filters [NOPUT] when no_put) with
 * progress_notify set. Returns a malloc'd buffer of *ret_len bytes. */
uint8_t *etcd_pb_encode_watch(const struct etcd_watch_spec *spec, size_t *ret_len);

/* Split the first gRPC message off buf (len bytes received so far).
 * Returns 1 with *msg (pointing into buf), *msg_len and *used (the bytes it
 * took, ETCD_PB_FRAME + *msg_len); 0 when buf holds no whole message yet;
 * -EBADMSG when the message is compressed (we never ask for compression) or
 * longer than ETCD_MAX_BODY. */
int etcd_pb_next_message(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len,
			 size_t *used);

/* Decode msg (len bytes, unframed), the answer of call (ETCD_CALL_WATCH: a
 * WatchResponse), into *ret, shaped as etcd_response_decode shapes the
 * gateway's answer (but an empty range or delete answer has its ranges[0],
 * where the gateway leaves the zero fields out): revision from the header; a range answer's kvs and
 * count in ranges[0]; a delete's count in ranges[0].deleted; a txn's
 * succeeded and one range per response op (empty for a put); a lease's ID
 * and TTL (TTL <= 0 on a keepalive: the lease is gone); a watch answer's
 * watch_id, created, canceled, compact_revision and events (is_delete for
 * DELETE). Returns 0, or -EBADMSG (ret->error says why) when msg is not a
 * valid message. Always release *ret with etcd_response_release. */
int etcd_pb_decode(enum etcd_call call, const uint8_t *msg, size_t len, struct etcd_response *ret);

/* The -errno of a call that ended with gRPC status code (the grpc-status
 * trailer; -1 when absent), the same as etcd_response_decode gives for the
 * HTTP status that etcd's gateway answers for that code: 0 OK; -EAGAIN
 * UNAVAILABLE, DEADLINE_EXCEEDED (retry, maybe on another member); -ENOENT
 * NOT_FOUND; -EINVAL INVALID_ARGUMENT, OUT_OF_RANGE; -EEXIST
 * FAILED_PRECONDITION; -EACCES PERMISSION_DENIED, UNAUTHENTICATED; -EPROTO
 * any other code (RESOURCE_EXHAUSTED, etcd's "too many requests", among
 * them: the caller backs off rather than fail over at once). */
int etcd_pb_status_errno(int code);
