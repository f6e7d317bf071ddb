/* events_internal.h — what events.c and events_json.c share. Not for use
 * outside events*.c. */
#pragma once

#include <jansson.h>
#include <string.h>

/* A string value that keeps whatever bytes s has (the encoder substitutes
 * U+FFFD for invalid UTF-8); NULL is "". New reference. */
static inline json_t *
jstr(const char *s)
{
	if (!s) {
		s = "";
	}
	return json_stringn_nocheck(s, strlen(s));
}

/* jstr(s), or JSON null when s is NULL. New reference. */
static inline json_t *
jstr_or_null(const char *s)
{
	return s ? jstr(s) : json_null();
}
