/* version.h: leafd's version (also read by tools/embed.c for the console). */
#ifndef LEAFD_VERSION_H
#define LEAFD_VERSION_H

#define LEAFD_VERSION "0.1.0"

#endif
