/* resp_parse.h: the Redis protocol's request side (RESP2 arrays of bulk
 * strings, and inline commands as telnet and redis-cli's inline mode send
 * them), parsed from a connection's input buffer.
 *
 * The parser keeps no state between calls: given the bytes received so far,
 * it either finds one whole command at their start, says it needs more, or
 * says why the input can never be a command (the connection must then be
 * answered with the error and closed). Every length is bounded by the
 * limits, so no input makes the caller buffer or allocate without bound.
 *
 * Thread-safety: pure; the result points into buf or into the caller's
 * scratch.
 */
#ifndef LEAFD_RESP_PARSE_H
#define LEAFD_RESP_PARSE_H

#include <stddef.h>

#define RESP_ARGS_MAX 32            /* arguments a command may have */

struct resp_limits {
    size_t max_args;                /* <= RESP_ARGS_MAX */
    size_t max_bulk;                /* bytes of one argument */
    size_t max_inline;              /* bytes of an inline command line */
};

struct resp_cmd {
    size_t      argc;
    const char *argv[RESP_ARGS_MAX];
    size_t      argl[RESP_ARGS_MAX];
    int         is_inline;
};

enum resp_parse_result {
    RESP_PARSE_OK,                  /* *cmd holds a command of *used bytes */
    RESP_PARSE_MORE,                /* a command has begun: read more */
    RESP_PARSE_EMPTY,               /* *used bytes of blank inline line(s) */
    RESP_PARSE_ERROR                /* *err: protocol error, close after it */
};

/* Parse the command at the start of buf[0..len). Inline arguments are
 * unquoted into scratch (scratch_cap >= max_inline is enough). *err is a
 * static string in Redis's wording ("Protocol error: ..."). */
enum resp_parse_result resp_parse(const char *buf, size_t len,
                                  const struct resp_limits *lim,
                                  char *scratch, size_t scratch_cap,
                                  struct resp_cmd *cmd, size_t *used,
                                  const char **err);

#endif
