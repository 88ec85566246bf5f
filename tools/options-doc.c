/* Documentation generated from options.def:
 *   options-doc                 the README's option table (Markdown)
 *   options-doc --man TEMPLATE  TEMPLATE with the line "@OPTIONS@" replaced
 *                               by man(7) paragraphs, "@VERSION@" by the
 *                               version and "@CHOICES:BACKING@" by the
 *                               valid values of HUGEZERO_BACKING (for
 *                               hugezero.7 and hugezero.1); any other
 *                               @...@ is an error
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

/* Write one template line with its @...@ tokens replaced. Returns -1 for
 * a token it does not know, so a typo fails the build. */
static int put_line(const char *line, const char *options)
{
	static const char choices[] = "@CHOICES:";
	const char *at, *end;
	char buf[256];

	if (strcmp(line, "@OPTIONS@\n") == 0) {
		fputs(options, stdout);
		return 0;
	}
	while ((at = strchr(line, '@')) != NULL) {
		fwrite(line, 1, (size_t)(at - line), stdout);
		end = strchr(at + 1, '@');
		if (end == NULL)
			break;
		if (strncmp(at, "@VERSION@", (size_t)(end - at + 1)) == 0) {
			fputs(HZ_VERSION, stdout);
		} else if (strncmp(at, choices, strlen(choices)) == 0 &&
			   hz_options_man_choices(at + strlen(choices),
						  (size_t)(end - at) - strlen(choices),
						  buf, sizeof(buf)) == 0) {
			fputs(buf, stdout);
		} else {
			fprintf(stderr, "options-doc: unknown %.*s in the template\n",
				(int)(end - at + 1), at);
			return -1;
		}
		line = end + 1;
	}
	fputs(line, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	char *text, line[4096];
	FILE *in;
	int ret = 0;

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
		if (put_line(line, text) != 0)
			ret = 1;
	fclose(in);
	free(text);
	return ret;
}
