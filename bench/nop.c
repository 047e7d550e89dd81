/* nop: the trivial program of the CLI start benchmark — it exits at once. */
int main(void)
{
        return 0;
}
