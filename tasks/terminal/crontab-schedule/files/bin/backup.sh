#!/bin/bash
echo "backup ran at $(date)"
