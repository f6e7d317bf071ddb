/* ctl_stream.c — GET /handler/events?follow=true: the recorder's ring as
 * newline-delimited JSON, then every new event as a chunk while the client
 * reads; a follower that falls CTL_STREAM_BUFFER_MAX bytes behind is cut (it
 * resumes with since=<last seq>). */
#include "ctl_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "events.h"
#include "log.h"

/* One ring entry as a line {"seq": N, "event": {...}}. */
static void
add_event_line(struct evbuffer *b, const struct events_entry *entry)
{
	evbuffer_add_printf(b, "{\"seq\": %llu, \"event\": ", (unsigned long long)entry->seq);
	evbuffer_add(b, entry->line, entry->len);
	evbuffer_add(b, "}\n", 2);
}

static void events_cb(const struct events_entry *entry, void *arg);

/* Subscribe to the recorder while someone follows it. */
void
ctl_streams_changed(struct ctl *c)
{
	struct events *e = c->agent.events;

	if (c->streams && !c->events_sub) {
		c->events_sub = events_subscribe(e, events_cb, c);
	} else if (!c->streams && c->events_sub) {
		events_unsubscribe(e, c->events_sub);
		c->events_sub = 0;
	}
}

void
ctl_stream_unlink(struct ctl *c, struct ctl_call *call)
{
	for (struct ctl_call **pp = &c->streams; *pp; pp = &(*pp)->stream_next) {
		if (*pp == call) {
			*pp = call->stream_next;
			c->stats.streams--;
			break;
		}
	}
	call->streaming = false;
}

static size_t
stream_queued(const struct ctl_call *call)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(call->req);

	return evcon ? evbuffer_get_length(
			       bufferevent_get_output(evhttp_connection_get_bufferevent(evcon)))
		     : 0;
}

static void
events_cb(const struct events_entry *entry, void *arg)
{
	struct ctl *c = arg;
	bool reap = false;

	for (struct ctl_call *call = c->streams; call; call = call->stream_next) {
		struct evbuffer *b;

		if (call->ending || call->doomed || entry->seq < call->next_seq) {
			continue;
		}
		b = evbuffer_new();
		add_event_line(b, entry);
		evhttp_send_reply_chunk(call->req, b);
		evbuffer_free(b);
		call->next_seq = entry->seq + 1;
		if (call->left > 0 && --call->left == 0) {
			call->ending = true;
			reap = true;
		} else if (stream_queued(call) > CTL_STREAM_BUFFER_MAX) {
			/* It reads slower than events come: cut it, it can resume
			 * with since=<last seq it saw>. */
			call->doomed = true;
			c->stats.streams_dropped++;
			reap = true;
			log_warn("control socket: dropping an events follower that fell %u bytes "
				 "behind",
				 CTL_STREAM_BUFFER_MAX);
		}
	}
	if (reap) {
		event_active(c->reap_ev, EV_TIMEOUT, 0);
	}
}

/* Ends streams that reached their limit and drops those that fell behind,
 * outside the recorder's and evhttp's callbacks. */
void
ctl_stream_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl *c = arg;
	struct ctl_call **pp = &c->streams;

	while (*pp) {
		struct ctl_call *call = *pp;
		struct ctl_conn *conn = call->conn;

		if (call->ending) {
			*pp = call->stream_next;
			c->stats.streams--;
			conn->call = NULL;
			evhttp_send_reply_end(call->req);
			ctl_call_free(call);
			continue;
		}
		if (call->doomed) {
			/* Its close callback unlinks and frees the call. */
			evhttp_connection_free(conn->evcon);
			pp = &c->streams;
			continue;
		}
		pp = &call->stream_next;
	}
	ctl_streams_changed(c);
}

int
ctl_call_events(struct ctl_call *call, uint64_t since, uint64_t limit, bool follow)
{
	struct ctl *c = call->ctl;
	struct events *e = c->agent.events;
	uint64_t first = events_first_seq(e), last = events_last_seq(e), seq = since + 1, sent = 0;
	struct evkeyvalq *h = evhttp_request_get_output_headers(call->req);
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	struct timeval wtv = {.tv_sec = CTL_STREAM_WRITE_TIMEOUT_S};

	call->content_type = "application/x-ndjson";
	if (since > 0 && first > since + 1) {
		evbuffer_add_printf(call->body, "{\"dropped\": %llu}\n",
				    (unsigned long long)(first - since - 1));
	}
	if (first > seq) {
		seq = first;
	}
	for (; seq <= last && (limit == 0 || sent < limit); seq++) {
		const struct events_entry *entry = events_ring_get(e, seq);

		if (entry) {
			add_event_line(call->body, entry);
			sent++;
		}
	}
	if (!follow || (limit > 0 && sent >= limit)) {
		return 0;
	}
	evhttp_add_header(h, "Content-Type", call->content_type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "Connection", "close");
	evhttp_send_reply_start(call->req, 200, "OK");
	if (evbuffer_get_length(call->body) > 0) {
		evhttp_send_reply_chunk(call->req, call->body);
	}
	/* Streams are idle for as long as no event comes: no read timeout, but
	 * read (a little) to see the client leave; a client that stops reading is
	 * cut after CTL_STREAM_WRITE_TIMEOUT_S. */
	evcon = evhttp_request_get_connection(call->req);
	bev = evhttp_connection_get_bufferevent(evcon);
	bufferevent_set_timeouts(bev, NULL, &wtv);
	bufferevent_setwatermark(bev, EV_READ, 0, CTL_STREAM_READ_MAX);
	bufferevent_enable(bev, EV_READ);
	call->streaming = true;
	/* The backlog covered everything up to last; since may be ahead. */
	call->next_seq = last + 1 > since + 1 ? last + 1 : since + 1;
	call->left = limit > 0 ? limit - sent : 0;
	call->stream_next = c->streams;
	c->streams = call;
	c->stats.streams++;
	ctl_call_defer(call, NULL, NULL);
	ctl_streams_changed(c);
	return 0;
}
