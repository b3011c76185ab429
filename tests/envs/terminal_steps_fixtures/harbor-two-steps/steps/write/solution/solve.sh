#!/bin/bash
echo alpha > /app/notes.txt
