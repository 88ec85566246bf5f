#ifndef HZ_OPTIONS_DOC_H
#define HZ_OPTIONS_DOC_H

#include <stddef.h>

/* Write the options table as a Markdown table into buf (at most size bytes,
 * NUL-terminated when size > 0). Returns the full length, like snprintf, so a
 * caller can size the buffer. */
size_t hz_options_markdown(char *buf, size_t size);

/* The same as man(7) paragraphs (.TP entries), for hugezero.7. */
size_t hz_options_man(char *buf, size_t size);

#endif /* HZ_OPTIONS_DOC_H */
