/* mc_parse.h: the request side of memcached's text protocol, parsed from a
 * connection's input buffer: one command line ("<name> <token>*" ending in
 * "\n" or "\r\n"), and, for a storage command, the length of the data block
 * that follows it.
 *
 * The parser keeps no state between calls: given the bytes received so far,
 * it finds one whole command line at their start, says it needs more, or
 * says why the input can never be put back in step (the connection must then
 * be answered and closed). A complete line that is not a valid command is
 * still a command (MC_BAD or MC_UNKNOWN), answered without closing: its
 * length is known, so the next line is found. A storage command's data block
 * is not read: the caller skips data_len bytes after the line. Every length
 * is bounded by the limits.
 *
 * Thread-safety: pure. Tokens are offsets into the line, so they stay valid
 * when the caller moves the line in its buffer.
 *
 * struct mc_cmd is also what mc_bin_parse.h makes of a binary frame (binary
 * set): its key is token 1, an offset into the frame.
 */
#ifndef LEAFD_MC_PARSE_H
#define LEAFD_MC_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define MC_KEY_MAX     250          /* memcached's key length limit */
#define MC_TOKENS_MAX  130          /* tokens of one line: name + 129 */

struct mc_limits {
    size_t max_line;                /* bytes of a line, its "\r\n" included */
    size_t max_keys;                /* keys of one get; < MC_TOKENS_MAX */
    uint64_t max_data;              /* bytes of a storage command's block */
};

enum mc_kind {
    MC_GET,                         /* get/gets <key>+: keys from token 1 */
    MC_STORE,                       /* set add replace append prepend cas ms */
    MC_REFUSED,                     /* incr decr touch delete gat gats, meta */
    MC_VERSION,
    MC_STATS,                       /* stats [group] */
    MC_QUIT,
    MC_VERBOSITY,
    MC_FLUSH_ALL,
    MC_UNKNOWN,                     /* not a command (an empty line too) */
    MC_BAD,                         /* a command, malformed: err says how */
    MC_NOOP                         /* binary only (mc_bin_parse.h) */
};

struct mc_cmd {
    enum mc_kind kind;
    const char *name;               /* the command's name (static), NULL
                                       for MC_UNKNOWN */
    unsigned char cas;              /* gets: answer with cas values */
    unsigned char noreply;          /* the line ends in "noreply" */
    /* memcached's binary protocol (mc_bin_parse.h); 0 in text */
    unsigned char binary;           /* a binary request frame */
    unsigned char quiet;            /* a quiet opcode (GETQ, GETKQ, QUITQ..) */
    unsigned char with_key;         /* GETK, GETKQ: the answer has the key */
    unsigned char opcode;           /* the frame's opcode */
    uint32_t opaque;                /* echoed in every answer (as received) */
    size_t   ntok;                  /* tokens (the name is token 0) */
    uint16_t off[MC_TOKENS_MAX];    /* token i is line[off[i]..+len[i]) */
    uint16_t len[MC_TOKENS_MAX];
    size_t   nkeys;                 /* MC_GET: keys, tokens 1..nkeys */
    uint64_t data_len;              /* MC_STORE: bytes after the line, its
                                       block and "\r\n" */
    const char *err;                /* MC_BAD: why (static) */
};

enum mc_parse_result {
    MC_PARSE_OK,                    /* *cmd holds a line of *used bytes */
    MC_PARSE_MORE,                  /* a line has begun: read more */
    MC_PARSE_ERROR                  /* *err: answer it and close */
};

/* Parse the line at the start of buf[0..len). *err is a static string for
 * a CLIENT_ERROR line ("line too long", ...). lim->max_line must be below
 * 65536 (offsets are 16 bits). */
enum mc_parse_result mc_parse(const char *buf, size_t len,
                              const struct mc_limits *lim, struct mc_cmd *cmd,
                              size_t *used, const char **err);

#endif
