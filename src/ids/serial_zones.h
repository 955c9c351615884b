/* serial_zones.h: the zone each shape of source = snowflake serials was
 * last printed in on this node, kept in a small file, so that a zone change
 * that would print local times again is refused at start.
 *
 * A snowflake serial prints the ID's millisecond in the code's local time.
 * A zone whose offset is smaller than the old one's (UTC+9 -> UTC+8) prints
 * the local times of the last hour again, with the same worker field and
 * per-ms sequences: the same text. The file has one line per shape (the
 * row shape of serial.h: prefix, pattern, worker and sequence widths), "<shape>
 * <zone name>", and is rewritten (temp file, fsync, rename) at each start.
 *
 * Thread-safety: none needed (start-up only).
 */
#ifndef LEAFD_SERIAL_ZONES_H
#define LEAFD_SERIAL_ZONES_H

#include <stdint.h>

struct config;
struct serials;

/* The file's path: snowflake.cache_file + ".serial-zones", or
 * "leafd-serial-zones-<leaf.name>.txt" in the working directory (malloc'd). */
char *serial_zones_path(const struct config *cfg);

/* For each source = snowflake code of s: if its shape was last printed in
 * another zone whose UTC offset at now_ms is larger than the code's zone's,
 * -1 with *cause naming the code, both zones, the file and what to do.
 * Otherwise record every such code's zone in the file (kept: the lines of
 * shapes not configured now) and return 0; -1 with *cause when the file
 * cannot be read or written. */
int serial_zones_check(const struct serials *s, const char *path,
                       int64_t now_ms, char **cause);

#endif
