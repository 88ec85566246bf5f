/* The options table rendered as documentation, so the README and the man
 * page are generated from options.def and cannot drift from it. */
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "options_doc.h"

static size_t append(char *buf, size_t size, size_t used, const char *text)
{
	int n = snprintf(used < size ? buf + used : NULL,
			 used < size ? size - used : 0, "%s", text);

	return used + (n > 0 ? (size_t)n : 0);
}

/* A table cell cannot hold a bare '|': write "a|b" as "a \| b". */
static void escape_pipes(const char *in, char *out, size_t size)
{
	size_t o = 0;

	for (; *in && o + 5 < size; in++) {
		if (*in == '|') {
			memcpy(out + o, " \\| ", 4);
			o += 4;
		} else {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}

size_t hz_options_markdown(char *buf, size_t size)
{
	char row[512], choices[128];
	size_t used = 0;

	used = append(buf, size, used,
		      "| variable | default | valid values | what it does |\n"
		      "|---|---|---|---|\n");
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);

		escape_pipes(d->choices, choices, sizeof(choices));
		if (d->def[0] == '\0')
			snprintf(row, sizeof(row), "| `%s` | (none) | %s | %s |\n",
				 d->env, choices, d->doc);
		else
			snprintf(row, sizeof(row), "| `%s` | `%s` | %s | %s |\n",
				 d->env, d->def, choices, d->doc);
		used = append(buf, size, used, row);
	}
	return used;
}

/* man text: a leading '.' or '\'' would be a request, '\' an escape. */
static void escape_roff(const char *in, char *out, size_t size)
{
	size_t o = 0;

	for (; *in && o + 3 < size; in++) {
		if (*in == '\\' || *in == '-')
			out[o++] = '\\';
		out[o++] = *in;
	}
	out[o] = '\0';
}

size_t hz_options_man(char *buf, size_t size)
{
	char row[1024], choices[256], doc[512], def[128];
	size_t used = 0;

	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);

		escape_roff(d->choices, choices, sizeof(choices));
		escape_roff(d->doc, doc, sizeof(doc));
		escape_roff(d->def[0] ? d->def : "(none)", def, sizeof(def));
		snprintf(row, sizeof(row), "%s.B %s\n%s\nDefault: %s; valid: %s.\n",
			 id ? ".TP\n" : "", d->env, doc, def, choices);
		used = append(buf, size, used, row);
	}
	return used;
}

int hz_options_man_choices(const char *id, size_t id_len, char *buf, size_t size)
{
	for (unsigned i = 0; i < HZ_OPT_COUNT; i++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)i);
		const char *suffix = d->env + strlen("HUGEZERO_");

		if (strlen(suffix) == id_len && strncmp(suffix, id, id_len) == 0) {
			escape_roff(d->choices, buf, size);
			return 0;
		}
	}
	return -1;
}
