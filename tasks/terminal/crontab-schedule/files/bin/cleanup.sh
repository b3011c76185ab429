#!/bin/bash
echo "cleanup ran at $(date)"
