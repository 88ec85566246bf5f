/* Documentation generated from options.def:
 *   options-doc                 the README's option table (Markdown)
 *   options-doc --man TEMPLATE  TEMPLATE with the line "@OPTIONS@" replaced
 *                               by man(7) paragraphs, "@VERSION@" by the
 *                               version (for hugezero.7 and hugezero.1)
 * The test options_table_matches_readme fails when README.md differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options_doc.h"

static char *render(size_t (*fn)(char *, size_t))
{
	size_t len = fn(NULL, 0);
	char *buf = malloc(len + 1);

	if (buf)
		fn(buf, len + 1);
	return buf;
}

static void put_line(const char *line, const char *options)
{
	const char *at = strstr(line, "@VERSION@");

	if (strcmp(line, "@OPTIONS@\n") == 0) {
		fputs(options, stdout);
	} else if (at) {
		printf("%.*s%s%s", (int)(at - line), line, HZ_VERSION, at + strlen("@VERSION@"));
	} else {
		fputs(line, stdout);
	}
}

int main(int argc, char **argv)
{
	char *text, line[4096];
	FILE *in;

	if (argc == 1) {
		text = render(hz_options_markdown);
		if (!text)
			return 1;
		fputs(text, stdout);
		free(text);
		return 0;
	}
	if (argc != 3 || strcmp(argv[1], "--man") != 0) {
		fprintf(stderr, "usage: options-doc [--man TEMPLATE]\n");
		return 2;
	}
	in = fopen(argv[2], "r");
	text = render(hz_options_man);
	if (!in || !text) {
		fprintf(stderr, "options-doc: cannot read %s\n", argv[2]);
		return 1;
	}
	while (fgets(line, sizeof(line), in))
		put_line(line, text);
	fclose(in);
	free(text);
	return 0;
}
