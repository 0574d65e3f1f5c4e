# embed_tactics.cmake: the committed convolution tactic tables
# (runtime/cuda/tactics/*.tsv, one per GPU model and cuDNN version) as C
# strings in one generated source, at build time (runtime/cuda/tactics.h:
# pcu_tactics_builtin). No table: an empty list.
#   cmake -DDIR=runtime/cuda/tactics -DOUT=FILE.c -P embed_tactics.cmake
file(GLOB files "${DIR}/*.tsv")
list(SORT files)
set(body "/* generated from the tables in ${DIR} by cmake/embed_tactics.cmake */\n#include <stddef.h>\n")
set(rows "")
set(i 0)
foreach(f IN LISTS files)
  get_filename_component(name "${f}" NAME_WE)
  file(READ "${f}" hex HEX)
  string(LENGTH "${hex}" hl)
  math(EXPR n "${hl} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const char t${i}[] = {${bytes}0x00};\n")
  string(APPEND rows "    {\"${name}\", t${i}, ${n}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "typedef struct { const char *name, *text; size_t len; } pcu_tactic_file;\n")
string(APPEND body "const pcu_tactic_file pcu_tactic_files[] = {\n${rows}    {NULL, NULL, 0}};\n")
string(APPEND body "const int pcu_tactic_n_files = ${i};\n")
file(WRITE "${OUT}" "${body}")
