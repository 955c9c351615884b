/* serial_loader.h: the database thread of serial numbers (segment source).
 *
 * One thread with its own store connection runs store_serial_alloc for the
 * codes serial.c asks for (serial_loader_want is its load hook) and installs
 * the ranges; after each load, or each failure, wake(arg, code) runs (it
 * retries the requests parked on that code). While the database fails, the
 * load is retried with exponential backoff up to segment.db_backoff_max_ms;
 * the failure is logged once per spell.
 *
 * Test only: LEAFD_TEST_SERIAL_DB_OFFSET_MS=N reads the database's clock N ms
 * off (added in the SQL, so every node given the same N sees one shifted
 * clock); it is logged as a warning at start.
 *
 * Ownership: serial_loader_free stops the thread and closes the store (NULL
 * is a no-op). Thread-safety: every function may be called from any thread.
 */
#ifndef LEAFD_SERIAL_LOADER_H
#define LEAFD_SERIAL_LOADER_H

#include <stddef.h>

struct config;
struct serials;
struct serial_loader;

/* Opens the store (NULL with *cause on a configuration error; a database
 * that is down is not one). */
struct serial_loader *serial_loader_new(const struct config *cfg, char **cause);
/* The codes to load for, and the wake; before serial_loader_start. */
void serial_loader_attach(struct serial_loader *l, struct serials *serials,
                          void (*wake)(void *arg, const char *code), void *arg);
/* Before serial_loader_start: does a row of the database, of another shape,
 * stand in the way of a code (serial_rows_check)? -1 with *cause naming
 * the row and the code; 0 when none does, or when the rows cannot be read
 * now (logged: each code's row is checked when it is first used, and a
 * refused code answers 503 with the reason until the row is out of its
 * way, looked at again every second). */
int  serial_loader_check(struct serial_loader *l, char **cause);
int  serial_loader_start(struct serial_loader *l, char **cause);
void serial_loader_stop(struct serial_loader *l);
void serial_loader_free(struct serial_loader *l);

/* The serial_hooks.load callback; arg is the loader. */
void serial_loader_want(void *arg, size_t i);

/* Did the last database call succeed? (one relaxed load) */
int  serial_loader_db_up(struct serial_loader *l);
void serial_loader_last_error(struct serial_loader *l, char *out, size_t cap);
/* Is code refused by a row of another shape? 1 with the reason in out. */
int  serial_loader_refusal(struct serial_loader *l, const char *code,
                           char *out, size_t cap);
/* Was the last load refused by the failover rule (store_marks.h)? 1 with
 * its 503 code (store_behind, db_failover, durability_degraded) and why. */
int  serial_loader_store_refusal(struct serial_loader *l, char *code,
                                 size_t ccap, char *why, size_t wcap);
const char *serial_loader_store(const struct serial_loader *l);

#endif
