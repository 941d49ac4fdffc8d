    // assets[0]: static
    // "/work/project/data.csv" is next to the project
