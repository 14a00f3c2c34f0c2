# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_file.cmake: writes a C
# source holding IN's bytes as an array (see embed.cmake).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed_file.cmake. */\n#include <stddef.h>\nextern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_len;\nconst unsigned char ${NAME}[] = {\n${body}0};\nconst size_t ${NAME}_len = sizeof ${NAME} - 1;\n")
