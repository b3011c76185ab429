#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
tr 'A-Z' 'a-z' < book.txt | tr -cs 'a-z' '\n' | grep -v '^$' > /tmp/words.$$ || true
sort /tmp/words.$$ | uniq -c | awk '{print $2, $1}' | sort -k2,2nr -k1,1 | head -n 10 > top_words.txt
{
  echo "total $(wc -l < /tmp/words.$$ | tr -d ' ')"
  echo "unique $(sort -u /tmp/words.$$ | wc -l | tr -d ' ')"
} > word_stats.txt
rm -f /tmp/words.$$
