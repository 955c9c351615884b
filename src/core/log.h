/* log.h: one line per event on stderr (or a file), with time and level.
 *
 * Thread-safe: each line is formatted into a local buffer and written with a
 * single write(2), so lines from different threads never interleave.
 * log_reopen() is called on SIGHUP to reopen a log file after rotation.
 */
#ifndef LEAFD_LOG_H
#define LEAFD_LOG_H

enum log_level { LOGL_DEBUG, LOGL_INFO, LOGL_WARN, LOGL_ERROR };

/* path NULL or "" or "-" means stderr. Returns 0, or -1 if the file cannot be
 * opened (then logging stays on stderr). */
int  log_init(enum log_level level, const char *path);
int  log_reopen(void);
void log_set_level(enum log_level level);
const char *log_level_name(enum log_level level);
int  log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(...) \
    do { if (log_enabled(LOGL_DEBUG)) log_msg(LOGL_DEBUG, __func__, __VA_ARGS__); } while (0)
#define log_info(...)  log_msg(LOGL_INFO, __func__, __VA_ARGS__)
#define log_warn(...)  log_msg(LOGL_WARN, __func__, __VA_ARGS__)
#define log_error(...) log_msg(LOGL_ERROR, __func__, __VA_ARGS__)

#endif
