/* mc_bin_parse.h: the request side of memcached's binary protocol, parsed
 * from a connection's input buffer: one frame (a 24-byte header, then
 * extras, key and value, their lengths in the header), made into the
 * struct mc_cmd the text parser makes (mc_parse.h), with binary set.
 *
 * Like mc_parse, it keeps no state between calls: given the bytes received
 * so far, it finds one frame at their start, says it needs more, or says why
 * the input can never be put back in step (answer with *status, when it is
 * not 0, and close). A frame whose lengths agree is a command even when
 * leafd refuses it (MC_REFUSED, MC_UNKNOWN): only its header is consumed,
 * and the caller skips data_len bytes of body after it, so the body of a
 * refused SET is never read as frames. A frame that leafd serves (GET, STAT,
 * NOOP, VERSION, QUIT) is consumed whole: *used covers its body, at most
 * 24 + MC_KEY_MAX bytes, and its key is token 1 (an offset into the frame).
 *
 * Checked: the magic (0x80), a key of at most MC_KEY_MAX bytes, extras and
 * key within the body, a value (body less extras and key) of at most
 * lim->max_data, and the shape memcached itself asks of each served opcode
 * (GET: a key and nothing else; STAT: a key or nothing; NOOP, VERSION,
 * QUIT: no body). The datatype and vbucket fields are not looked at.
 *
 * Thread-safety: pure.
 */
#ifndef LEAFD_MC_BIN_PARSE_H
#define LEAFD_MC_BIN_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "mc_parse.h"

#define MC_BIN_REQ_MAGIC 0x80
#define MC_BIN_RES_MAGIC 0x81
#define MC_BIN_HEADER    24

/* The opcodes leafd answers other than with "unknown command". */
enum mc_bin_op {
    MC_BIN_OP_GET = 0x00, MC_BIN_OP_QUIT = 0x07, MC_BIN_OP_GETQ = 0x09,
    MC_BIN_OP_NOOP = 0x0a, MC_BIN_OP_VERSION = 0x0b, MC_BIN_OP_GETK = 0x0c,
    MC_BIN_OP_GETKQ = 0x0d, MC_BIN_OP_STAT = 0x10, MC_BIN_OP_QUITQ = 0x17
};

/* Response status codes (memcached's protocol_binary.h). */
enum mc_bin_status {
    MC_BIN_OK = 0x0000,
    MC_BIN_KEY_ENOENT = 0x0001,     /* key not found */
    MC_BIN_E2BIG = 0x0003,          /* value too large */
    MC_BIN_EINVAL = 0x0004,         /* invalid arguments */
    MC_BIN_AUTH_ERROR = 0x0008,     /* authentication error */
    MC_BIN_UNKNOWN_COMMAND = 0x0081,
    MC_BIN_NOT_SUPPORTED = 0x0083,
    MC_BIN_EINTERNAL = 0x0084,      /* internal error */
    MC_BIN_ETMPFAIL = 0x0086        /* temporary failure */
};

/* Parse the frame at the start of buf[0..len). OK: *cmd holds it, *used
 * bytes of it (the header, or the whole frame), cmd->data_len the body
 * bytes after them to skip. MORE: read more. ERROR: *err (static) says why;
 * *status is the status to answer with before closing, or 0: close without
 * an answer (a bad magic byte, where no frame starts). cmd's opcode and
 * opaque are set for the answer whenever the header was whole. */
enum mc_parse_result mc_bin_parse(const char *buf, size_t len,
                                  const struct mc_limits *lim,
                                  struct mc_cmd *cmd, size_t *used,
                                  uint16_t *status, const char **err);

/* A response header at out: magic 0x81, cmd's opcode and opaque, the
 * status, the lengths (body = extras + key + value) and the CAS. */
void mc_bin_header(unsigned char out[MC_BIN_HEADER], uint8_t opcode,
                   uint32_t opaque, uint16_t status, uint8_t extlen,
                   uint16_t keylen, uint32_t bodylen, uint64_t cas);

#endif
