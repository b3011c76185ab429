#!/bin/bash
wc -l < /app/data.csv >> /app/notes.txt
