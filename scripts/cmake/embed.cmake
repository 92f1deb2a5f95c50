# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake: the bytes of IN as a C array NAME and
# its length NAME_len (the library carries measured data it needs at run time: ref/sfu's table).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n" body "${body}")
set(head "/* generated from ${IN} by scripts/cmake/embed.cmake: do not edit */\n")
string(APPEND head "#include <stddef.h>\nconst unsigned char ${NAME}[] = {\n")
set(tail "\n};\nconst size_t ${NAME}_len = ${n};\n")
file(WRITE "${OUT}.tmp" "${head}${body}${tail}")
file(RENAME "${OUT}.tmp" "${OUT}")
