/* config_file.h — the syntax of elasticd's configuration file (elasticd.conf(5)):
 * one "key = value" setting per line, "#" comments, and values split into words
 * with a small, shell-like quoting (no expansion of any kind). Pure: text in,
 * entries out. What a key means, and whether its value is valid, is config.c's
 * business (the option table). */
#pragma once

#include <stddef.h>

/* The largest configuration file elasticd reads, in bytes. */
#define CONFIG_FILE_MAX (1024 * 1024)

/* One "key = value" line. */
struct config_file_entry {
	char *key;    /* as written, between the line's start and '=', blanks trimmed */
	char **words; /* the value split into words (strv; never NULL, may be empty) */
	int line;     /* 1-based line number */
};

struct config_file {
	struct config_file_entry *entries; /* in file order */
	size_t n;
};

/* Parse text (len bytes, need not be NUL-terminated) into *ret, which is
 * overwritten and later released with config_file_release. Lines end with
 * "\n" (a "\r" before it is a blank); a leading UTF-8 byte order mark is
 * skipped; blank lines and lines whose first non-blank character is '#' are
 * ignored. Every other line is KEY = VALUE, where KEY is letters, digits, '-'
 * and '_', and VALUE is split by config_file_split. Keys are not checked
 * against any list and may repeat. name is the file's name for messages.
 * Returns 0, or -EINVAL with *ret empty and *reterr a malloc'd
 * "NAME:LINE: reason" (caller frees). */
int config_file_parse(const char *name, const char *text, size_t len, struct config_file *ret,
		      char **reterr);

/* Free every entry; accepts a zeroed struct and leaves it zeroed. */
void config_file_release(struct config_file *f);

/* Split one value (NUL-terminated, one line: no "\n") into words, as sh(1)
 * splits a simple command, minus every expansion: blanks (space, tab, "\r")
 * separate words; '...' quotes everything up to the next '; "..." quotes
 * everything up to the next unescaped ", where \" and \\ stand for " and \
 * and any other backslash is kept; outside quotes a backslash makes the next
 * character literal; quoted and unquoted parts next to each other form one
 * word ("--name='a b'" is one word); '' is an empty word; an unquoted '#' at
 * the start of a word starts a comment that runs to the end of the line. '$',
 * '*', '~' and the like are ordinary characters. Returns 0 and a new strv in
 * *ret_words (strv_free; empty when there is no word), or -EINVAL with
 * *reterr a malloc'd reason without file or line (unterminated quote,
 * backslash at the end). */
int config_file_split(const char *value, char ***ret_words, char **reterr);
