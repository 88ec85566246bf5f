#ifndef HZ_OPTIONS_DOC_H
#define HZ_OPTIONS_DOC_H

#include <stddef.h>

/* Write the options table as a Markdown table into buf (at most size bytes,
 * NUL-terminated when size > 0). Returns the full length, like snprintf, so a
 * caller can size the buffer. */
size_t hz_options_markdown(char *buf, size_t size);

/* The same as man(7) paragraphs (.TP entries), for hugezero.7. */
size_t hz_options_man(char *buf, size_t size);

/* The valid values of option HUGEZERO_<id> (id_len bytes of id), escaped
 * for man(7), into buf: "auto|hugetlb1g|..." for an ENUM. Returns 0, or -1
 * when no option has that id. */
int hz_options_man_choices(const char *id, size_t id_len, char *buf, size_t size);

#endif /* HZ_OPTIONS_DOC_H */
