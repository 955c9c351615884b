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
 * The file covers one node's history. A worker ID that moves to another
 * node (a worker-ID store hands it to another identity) carries its own
 * record in the store instead: the serial zone gate below.
 *
 * Thread-safety: serial_zones_check: none needed (start-up only). The gate:
 * see struct serial_zgate.
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

/* DESIGN: the serial zone gate, a worker ID's zones kept in its store.
 *   - With each worker ID the store keeps a record (serial_zonerec.h):
 *     per shape of snowflake serials, ahead_ms such that every serial of
 *     that shape printed under the worker ID shows a local time at or
 *     below the record's fence + ahead_ms (L, the shape's bound).
 *   - The holder writes the record with every fence write (the fence is
 *     above every ID it issued, and with zones that never turn their clocks
 *     back, t + offset(t) <= fence + offset(fence) for t <= fence): for its
 *     own shapes ahead = max(L claimed - fence, offset of its zone at
 *     fence); the shapes it does not print are carried (ahead = L claimed -
 *     fence) until no zone can print a time at or below L any more (ahead
 *     at or below -12 h). So L never goes down while the worker ID passes
 *     from holder to holder.
 *   - On a claim, the new holder reads the record, relative to the fence
 *     the claim gates on (at or above the store's: a store that went back
 *     in time, or ZooKeeper's claim write, only raises L), and refuses
 *     each serial of its own shapes whose local time is at or below L (503
 *     serial_zone_gate) until its clock passes; other IDs are served. A
 *     zone at or ahead of the old one is past L as soon as it is past the
 *     fence, so an unchanged zone never waits.
 *   - A record that cannot be read is kept in the store as it is, and
 *     every snowflake serial of this node is refused (it cannot tell what
 *     was printed) until the record is fixed or removed and the node
 *     restarted (the record is read when the worker ID is claimed).
 *   - Not covered: a store that lost the record with its data (the epoch
 *     gate covers the IDs, not the local times), and a static worker ID
 *     (no store: the per-node file above only). */

/* One node's gate: the record claimed with its worker ID, the bound of
 * each code, and the record to write. serial_zgate_claimed and
 * serial_zgate_record run on the lease's thread (the opener, then the
 * keeper); serial_zgate_allows and serial_zgate_json on any thread. The
 * record's fields are guarded by a mutex; the bounds are atomics. */
struct serial_zgate;
struct sbuf;

struct serial_zgate *serial_zgate_new(const struct serials *s);
void serial_zgate_free(struct serial_zgate *g);                 /* NULL ok */
/* The wlease hook's bodies (arg: the gate): rec is the store's record for
 * the worker ID just claimed ("" none), len its length, fence_ms the fence
 * the claim gates on. The bounds are installed before it returns. */
void  serial_zgate_claimed(void *arg, const char *rec, size_t len,
                           int64_t fence_ms);
/* The record to write with fence_ms (malloc'd), or NULL: keep the store's
 * (a record that could not be read). fence_ms is at or above the claim's. */
char *serial_zgate_record(void *arg, int64_t fence_ms);
/* May code i print a serial of the snowflake ms t? 1 yes; 0 no, with the
 * refusal (what, until when, why, what to do) in buf and *retry_s. */
int   serial_zgate_allows(struct serial_zgate *g, size_t i, int64_t t,
                          char *buf, size_t size, int *retry_s);
/* ,"zone_gates":[{"code":..,"until_ms":..},...] for codes gated at now_ms
 * (nothing when none); the count. */
int   serial_zgate_json(struct serial_zgate *g, int64_t now_ms,
                        struct sbuf *out);

#endif
