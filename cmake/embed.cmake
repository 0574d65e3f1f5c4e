# embed.cmake: turn a text file into a C header holding it as a string, at
# build time (the page's script and style for ppcc --report-html are kept as
# plain .js and .css files in the source tree, and only the generated header,
# never committed, carries them into the binary).
#   cmake -DIN=FILE -DOUT=HEADER -DNAME=SYMBOL -P embed.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed.cmake */\nstatic const char ${NAME}[] = {${bytes}0x00};\n")
