/* The small library the dlopen cases load by bare name. */
int hostile_answer(void);

int hostile_answer(void)
{
	return 42;
}
