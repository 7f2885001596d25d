/* scratch: run tern_cmd_bench under ASan without the rest of the CLI */
int tern_cmd_bench(int argc, char **argv);
int main(int argc, char **argv);
int main(int argc, char **argv)
{
    return tern_cmd_bench(argc - 1, argv + 1);
}
